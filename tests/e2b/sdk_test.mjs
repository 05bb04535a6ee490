// The E2B tier's SDK script (tests/e2b/README in tests/README.md): the
// official `e2b` JavaScript SDK, configured only by E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY, against `vmm e2b serve`.
//   E2B_SDK_DIR=$(tests/e2b/sdk.sh) node sdk_test.mjs host SANDBOX DIR   a sandbox the caller made (the
//                                        host build of guest-init), DIR a
//                                        scratch folder it serves
//   node sdk_test.mjs vm                 Sandbox.create('base') and the
//                                        lifecycle: pause, connect, kill
// Prints "ok   ..." / "FAIL ..." lines and "  sdk: N ok, M failed" (the
// caller adds them to its own count);
// exits 1 on a failure. E2B_TEST_ONLY=a,b runs only those parts.
import Module, { createRequire } from 'node:module'
import fs from 'node:fs'

// E2B_TEST_BINARY=1: the SDK's Connect transport speaks binary protobuf
// (application/proto, connect+proto: what the Python SDK sends), not the
// JSON the JavaScript SDK chooses, with everything else as it is.
let binaryTransports = 0
if (process.env.E2B_TEST_BINARY) {
  const load = Module._load
  Module._load = function (request, ...rest) {
    const m = load.call(this, request, ...rest)
    if (request !== '@connectrpc/connect-web') return m
    return {
      ...m,
      createConnectTransport: (o) => {
        binaryTransports++
        return m.createConnectTransport({ ...o, useBinaryFormat: true })
      },
    }
  }
}

// the SDK where tests/e2b/sdk.sh installed it (E2B_SDK_DIR)
const require = createRequire(`${process.env.E2B_SDK_DIR}/package.json`)
const { Sandbox, CommandExitError, AuthenticationError } = require('e2b')

const mode = process.argv[2]
let okN = 0
let failN = 0
const only = (process.env.E2B_TEST_ONLY || '').split(',').filter(Boolean)
const want = (p) => !only.length || only.includes(p)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function check(name, cond, detail) {
  if (cond) {
    okN++
    console.log(`ok   ${name}`)
  } else {
    failN++
    console.log(`FAIL ${name}${detail === undefined ? '' : ': ' + detail}`)
  }
}

async function part(name, fn) {
  if (!want(name)) return
  try {
    await fn()
  } catch (e) {
    failN++
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`)
  }
}

async function until(fn, ms = 10000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await fn()) return true
    await sleep(100)
  }
  return false
}

async function commands(sbx) {
  if (process.env.E2B_TEST_BINARY) check('the SDK\'s transport is on binary protobuf', binaryTransports > 0)
  await part('commands', async () => {
    const r = await sbx.commands.run('echo hello; echo oops >&2')
    check('commands.run: stdout', r.stdout === 'hello\n', JSON.stringify(r.stdout))
    check('commands.run: stderr', r.stderr === 'oops\n', JSON.stringify(r.stderr))
    check('commands.run: exit code 0', r.exitCode === 0, r.exitCode)
    const e = await sbx.commands.run('echo "$FOO-$BAR"', { envs: { FOO: 'foo', BAR: 'bar baz' } })
    check('commands.run: envs', e.stdout === 'foo-bar baz\n', JSON.stringify(e.stdout))
    const c = await sbx.commands.run('pwd', { cwd: '/tmp' })
    check('commands.run: cwd', c.stdout.trim() === '/tmp', JSON.stringify(c.stdout))
    let thrown
    try {
      await sbx.commands.run('echo before; exit 3')
    } catch (err) {
      thrown = err
    }
    check('commands.run: a failing command raises CommandExitError', thrown instanceof CommandExitError, thrown)
    check('CommandExitError: exitCode 3 and the output', thrown && thrown.exitCode === 3 && thrown.stdout === 'before\n',
      thrown && `${thrown.exitCode} ${JSON.stringify(thrown.stdout)}`)
    const chunks = []
    await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.1; done', { onStdout: (d) => chunks.push(d) })
    check('commands.run: onStdout streams', chunks.join('') === '1\n2\n3\n', JSON.stringify(chunks))
  })
  await part('background', async () => {
    const h = await sbx.commands.run('while true; do echo tick; sleep 0.2; done', { background: true, timeoutMs: 0 })
    check('background: a pid', typeof h.pid === 'number' && h.pid > 0, h.pid)
    const procs = await sbx.commands.list()
    check('commands.list: the background command', procs.some((p) => p.pid === h.pid), JSON.stringify(procs))
    check('background: its output read', await until(() => h.stdout.includes('tick\ntick\n')), JSON.stringify(h.stdout))
    await sleep(600)
    const again = await sbx.commands.connect(h.pid, { timeoutMs: 0 })
    check('commands.connect: the output from then on',
      await until(() => again.stdout.includes('tick')) && again.stdout.length < h.stdout.length,
      `${again.stdout.length} < ${h.stdout.length}`)
    check('commands.kill: killed', (await sbx.commands.kill(h.pid)) === true)
    let ended
    try {
      await h.wait()
    } catch (err) {
      ended = err
    }
    check('background: its end after the kill (exit -1, signal)', ended instanceof CommandExitError && ended.exitCode === -1,
      ended && `${ended.exitCode} ${ended.error}`)
    const after = await sbx.commands.list()
    check('commands.list: gone after the kill', !after.some((p) => p.pid === h.pid))
    check('commands.kill: an unknown pid is false', (await sbx.commands.kill(999999)) === false)
  })
}

async function pty(sbx) {
  await part('pty', async () => {
    let out = ''
    const dec = new TextDecoder()
    const enc = (t) => new TextEncoder().encode(t)
    const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) }, timeoutMs: 0 })
    check('pty.create: a pid', typeof t.pid === 'number' && t.pid > 0, t.pid)
    await sbx.pty.sendInput(t.pid, enc('stty size; echo pty-$((6*7))\n'))
    check('pty.sendInput: the shell runs it', await until(() => out.includes('pty-42')), JSON.stringify(out))
    check('pty: its size', out.includes('24 80'), JSON.stringify(out))
    await sbx.pty.resize(t.pid, { cols: 100, rows: 30 })
    await sbx.pty.sendInput(t.pid, enc('stty size\n'))
    check('pty.resize', await until(() => out.includes('30 100')), JSON.stringify(out))
    check('pty.kill', (await sbx.pty.kill(t.pid)) === true)
  })
}

async function files(sbx, dir) {
  await part('files', async () => {
    const info = await sbx.files.write(`${dir}/a.txt`, 'hello file')
    check('files.write: its entry', info && info.path === `${dir}/a.txt` && info.name === 'a.txt', JSON.stringify(info))
    check('files.read', (await sbx.files.read(`${dir}/a.txt`)) === 'hello file')
    const bytes = new Uint8Array(70000).map((_, i) => i % 251)
    await sbx.files.write(`${dir}/bin.dat`, bytes.buffer)
    const back = await sbx.files.read(`${dir}/bin.dat`, { format: 'bytes' })
    check('files.write/read: 70000 binary bytes', back.length === 70000 && back.every((v, i) => v === i % 251), back.length)
    await sbx.files.write([{ path: `${dir}/m1.txt`, data: 'one' }, { path: `${dir}/sub/m2.txt`, data: 'two' }])
    check('files.write: several files at once', (await sbx.files.read(`${dir}/sub/m2.txt`)) === 'two')
    const ls = await sbx.files.list(dir)
    const names = ls.map((e) => e.name).sort()
    check('files.list', JSON.stringify(names) === JSON.stringify(['a.txt', 'bin.dat', 'm1.txt', 'sub']), JSON.stringify(names))
    const f = ls.find((e) => e.name === 'a.txt')
    check('files.list: type and size', f && f.type === 'file' && f.size === 10, JSON.stringify(f))
    check('files.list: a directory', ls.find((e) => e.name === 'sub')?.type === 'dir')
    const deep = await sbx.files.list(dir, { depth: 2 })
    check('files.list: depth 2', deep.some((e) => e.path === `${dir}/sub/m2.txt`), JSON.stringify(deep.map((e) => e.path)))
    check('files.exists: yes', (await sbx.files.exists(`${dir}/a.txt`)) === true)
    check('files.exists: no', (await sbx.files.exists(`${dir}/nope.txt`)) === false)
    check('files.makeDir: new', (await sbx.files.makeDir(`${dir}/d/e`)) === true)
    check('files.makeDir: there already', (await sbx.files.makeDir(`${dir}/d/e`)) === false)
    const moved = await sbx.files.rename(`${dir}/a.txt`, `${dir}/d/b.txt`)
    check('files.rename', moved.path === `${dir}/d/b.txt` && !(await sbx.files.exists(`${dir}/a.txt`)), JSON.stringify(moved))
    check('files.read: the renamed file', (await sbx.files.read(`${dir}/d/b.txt`)) === 'hello file')
    await sbx.files.remove(`${dir}/d`)
    check('files.remove: a directory with a file', (await sbx.files.exists(`${dir}/d`)) === false)
    let nf
    try {
      await sbx.files.read(`${dir}/missing.txt`)
    } catch (err) {
      nf = err
    }
    check('files.read: a missing file raises NotFound', nf && /NotFound/.test(nf.name), nf && nf.name)
    const gi = await sbx.files.getInfo(`${dir}/m1.txt`)
    check('files.getInfo', gi.name === 'm1.txt' && gi.type === 'file' && gi.size === 3, JSON.stringify(gi))
  })
  await part('watch', async () => {
    const seen = []
    const w = await sbx.files.watchDir(dir, (ev) => seen.push(ev))
    await sleep(300)
    await sbx.files.write(`${dir}/watched.txt`, 'x')
    const got = await until(() => seen.some((e) => e.name === 'watched.txt'), 10000)
    check('files.watchDir: sees a write', got, JSON.stringify(seen))
    check('files.watchDir: as a write event', seen.some((e) => e.name === 'watched.txt' && e.type === 'write'),
      JSON.stringify(seen))
    await w.stop()
  })
}

async function control(sbx) {
  await part('control', async () => {
    const list = await Sandbox.list().nextItems()
    check('Sandbox.list: finds it', list.some((s) => s.sandboxId === sbx.sandboxId), JSON.stringify(list.map((s) => s.sandboxId)))
    const info = await sbx.getInfo()
    check('getInfo: running', info.state === 'running' && info.sandboxId === sbx.sandboxId, JSON.stringify(info))
    await sbx.setTimeout(600_000)
    const later = await sbx.getInfo()
    const left = later.endAt.getTime() - Date.now()
    check('setTimeout: endAt about 600 s on', left > 590_000 && left < 610_000, left)
    check('isRunning', (await sbx.isRunning()) === true)
    const m = await sbx.getMetrics()
    check('getMetrics: CPU and memory from the guest', m.length === 1 && m[0].cpuCount >= 1 && m[0].memTotal > 0 &&
      m[0].memUsed > 0 && m[0].memUsed <= m[0].memTotal && m[0].cpuUsedPct >= 0 && m[0].cpuUsedPct <= 100,
      JSON.stringify(m))
    if (mode === 'vm') check('getMetrics: the disk', m[0]?.diskTotal > 0 && m[0]?.diskUsed > 0, JSON.stringify(m))
    let auth
    try {
      await Sandbox.list({ apiKey: 'vmt_000000000000_' + '0'.repeat(64) }).nextItems()
    } catch (err) {
      auth = err
    }
    check('a wrong API key is refused (AuthenticationError)', auth instanceof AuthenticationError, auth && auth.name)
  })
}

async function lifecycle(sbx) {
  await part('pause', async () => {
    await sbx.files.write('/root/kept.txt', 'kept across the pause')
    const h = await sbx.commands.run('sleep 3600', { background: true, timeoutMs: 0 })
    await h.disconnect()
    check('pause()', (await sbx.pause()) === true)
    const info = await Sandbox.getInfo(sbx.sandboxId)
    check('getInfo: paused', info.state === 'paused', info.state)
    // a resume without a timeout gives the sandbox the spec's 15 s
    // (openapi.yml ResumedSandbox/ConnectSandbox): the rest of the run
    // (the lifecycle and fork parts) outlasts that on a slow host
    const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 600_000 })
    check('Sandbox.connect: the same sandbox', again.sandboxId === sbx.sandboxId)
    check('connect: the file is still there', (await again.files.read('/root/kept.txt')) === 'kept across the pause')
    const procs = await again.commands.list()
    check('connect: the background process is still there', procs.some((p) => p.pid === h.pid), JSON.stringify(procs))
    await again.commands.kill(h.pid)
  })
  await part('autopause', async () => {
    const ap = await Sandbox.create('base', { timeoutMs: 5000, lifecycle: { onTimeout: 'pause' } })
    await ap.files.write('/root/ap.txt', 'before the timeout')
    const paused = await until(async () => (await Sandbox.getInfo(ap.sandboxId)).state === 'paused', 90000)
    check('lifecycle onTimeout pause: paused at its timeout', paused)
    const back = await Sandbox.connect(ap.sandboxId)
    check('lifecycle onTimeout pause: connect resumes it, its file kept',
      (await back.files.read('/root/ap.txt')) === 'before the timeout')
    await back.kill()
  })
  await part('fork', async () => {
    await sbx.files.write('/root/forked.txt', 'from the parent')
    const t0 = performance.now()
    const forks = await sbx.fork()
    const f = forks[0]
    console.log(`figure: fork() to a running clone: ${(performance.now() - t0).toFixed(0)} ms`)
    check('fork(): one clone', forks.length === 1 && f && !(f instanceof Error) && f.sandboxId !== sbx.sandboxId,
      f instanceof Error ? f.message : f && f.sandboxId)
    if (!f || f instanceof Error) return
    check('fork(): the clone has the parent\'s file', (await f.files.read('/root/forked.txt')) === 'from the parent')
    await f.files.write('/root/forked.txt', 'the child')
    check('fork(): the parent keeps its own', (await sbx.files.read('/root/forked.txt')) === 'from the parent')
    check('fork(): the parent runs on', (await sbx.commands.run('echo on')).stdout === 'on\n')
    const list = await Sandbox.list().nextItems()
    check('fork(): the clone is listed', list.some((s) => s.sandboxId === f.sandboxId))
    // the fork's snapshot lives as long as a sandbox restored from it:
    // kept through the reaper's rounds (one a second), removed after
    const snaps = `${process.env.VMM_STATE_DIR}/.e2b/snapshots`
    const held = () => (fs.existsSync(snaps) ? fs.readdirSync(snaps) : [])
    await new Promise((resolve) => setTimeout(resolve, 2500))
    check('fork(): its snapshot is kept while the clone lives', held().length === 1, held().join(' '))
    await f.kill()
    let left = held()
    for (let i = 0; i < 100 && left.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      left = held()
    }
    check('fork(): its snapshot is removed once the clone is gone', left.length === 0, left.join(' '))
  })
  await part('second', async () => {
    const t0 = performance.now()
    const two = await Sandbox.create('base')
    const t1 = performance.now()
    await two.commands.run('echo first')
    const t2 = performance.now()
    console.log(`figure: a second Sandbox.create('base') to the first command's output: ${(t2 - t0).toFixed(0)} ms ` +
      `(create ${(t1 - t0).toFixed(0)} ms, the command ${(t2 - t1).toFixed(0)} ms)`)
    check('a second sandbox', two.sandboxId !== sbx.sandboxId)
    const r = await two.commands.run('cat /root/kept.txt 2>&1; echo $?')
    check('the second sandbox is its own', !r.stdout.includes('kept across'), JSON.stringify(r.stdout))
    await two.kill()
  })
  await part('kill', async () => {
    await sbx.kill()
    const list = await Sandbox.list().nextItems()
    check('kill(): gone from the list', !list.some((s) => s.sandboxId === sbx.sandboxId))
    let nf
    try {
      await Sandbox.getInfo(sbx.sandboxId)
    } catch (err) {
      nf = err
    }
    check('getInfo after kill: not found', nf && /NotFound/.test(nf.name), nf && nf.name)
  })
}

if (mode === 'host') {
  const sbx = await Sandbox.connect(process.argv[3])
  await commands(sbx)
  await pty(sbx)
  await files(sbx, process.argv[4])
  await control(sbx)
} else if (mode === 'vm') {
  // Node loads its fetch (undici) on the first request: seconds under
  // the harness's emulation, the client's and not the sandbox's. One
  // call first, so the figure is the create's.
  await Sandbox.list().nextItems()
  const t0 = performance.now()
  let sbx
  await part('create', async () => {
    sbx = await Sandbox.create('base')
    const t1 = performance.now()
    const r = await sbx.commands.run('echo first')
    const t2 = performance.now()
    check('Sandbox.create(base) and a first command', r.stdout === 'first\n', JSON.stringify(r.stdout))
    console.log(`figure: Sandbox.create('base') to the first command's output: ${(t2 - t0).toFixed(0)} ms ` +
      `(create ${(t1 - t0).toFixed(0)} ms, the command ${(t2 - t1).toFixed(0)} ms)`)
  })
  if (sbx) {
    await commands(sbx)
    await pty(sbx)
    await files(sbx, '/root/e2b-test')
    await control(sbx)
    await lifecycle(sbx)
  }
} else {
  console.error('usage: sdk_test.mjs host SANDBOX DIR | vm')
  process.exit(2)
}
console.log(`  sdk: ${okN} ok, ${failN} failed`)
process.exit(failN ? 1 : 0)
