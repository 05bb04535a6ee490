// wordcount's tests, run by `npm test` (node --test): counting, files,
// worker threads, a child process.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const wc = require('../lib/wordcount');

test('counts words case-insensitively', () => {
  const m = wc.count('The cat and the hat. THE end');
  assert.strictEqual(m.get('the'), 3);
  assert.strictEqual(m.get('cat'), 1);
});

test('top orders by count, then by word', () => {
  assert.deepStrictEqual(wc.top(wc.count('b a b c a b'), 2), [['b', 3], ['a', 2]]);
});

test('an empty text has no words', () => {
  assert.strictEqual(wc.count('  ... ').size, 0);
});

test('counts a file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wc-'));
  const f = path.join(dir, 'a.txt');
  fs.writeFileSync(f, 'one two two\nthree three three\n');
  const m = await wc.countFile(f);
  assert.deepStrictEqual(wc.top(m, 1), [['three', 3]]);
  fs.rmSync(dir, { recursive: true });
});

test('worker threads count files and the counts add up', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wc-'));
  const files = [0, 1, 2].map((i) => {
    const f = path.join(dir, `f${i}.txt`);
    fs.writeFileSync(f, 'alpha beta '.repeat(i + 1));
    return f;
  });
  const m = await wc.countFilesInWorkers(files);
  assert.strictEqual(m.get('alpha'), 6);
  assert.strictEqual(m.get('beta'), 6);
  fs.rmSync(dir, { recursive: true });
});

test('a child process runs node', () => {
  const out = execFileSync(process.execPath, ['-e', 'console.log(require("./lib/wordcount").count("x y x").get("x"))'],
    { cwd: path.join(__dirname, '..') });
  assert.strictEqual(out.toString().trim(), '2');
});

test.describe('subtests', () => {
  test.it('run in a describe block', () => assert.ok(true));
});
