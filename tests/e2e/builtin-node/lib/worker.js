// One file's word counts, in a worker thread (lib/wordcount.js).
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { countFile } = require('./wordcount');

countFile(workerData).then((m) => parentPort.postMessage([...m.entries()]));
