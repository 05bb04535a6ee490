// wordcount: word frequencies of a text, of a file, and of many files in
// worker threads. The package the e2e part "builtin" runs `npm test` of
// in the built-in node image and on the host (tests/e2e/builtin.sh).
'use strict';
const fs = require('node:fs/promises');
const path = require('node:path');
const { Worker } = require('node:worker_threads');

function count(text) {
  const m = new Map();
  for (const w of text.toLowerCase().match(/[a-z0-9']+/g) || []) m.set(w, (m.get(w) || 0) + 1);
  return m;
}

function top(m, n) {
  return [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, n);
}

async function countFile(file) {
  return count(await fs.readFile(file, 'utf8'));
}

// Each file counted in a worker thread, the maps merged here.
function countFilesInWorkers(files) {
  const worker = path.join(__dirname, 'worker.js');
  return Promise.all(files.map((f) => new Promise((resolve, reject) => {
    const w = new Worker(worker, { workerData: f });
    w.once('message', resolve);
    w.once('error', reject);
  }))).then((parts) => {
    const m = new Map();
    for (const part of parts) for (const [w, c] of part) m.set(w, (m.get(w) || 0) + c);
    return m;
  });
}

module.exports = { count, top, countFile, countFilesInWorkers };
