// Drives Daytona's official TypeScript SDK, unchanged, through a whole
// flow against `sandbox serve --api daytona`. The SDK reads DAYTONA_API_URL
// and DAYTONA_API_KEY from the environment, as it does against Daytona.
// Every step checks what came back and the script exits non-zero at the
// first failure; it must also exit by itself (the SDK's events gateway
// connection has to close), which the Go test bounds with a timeout.
import { Daytona } from '@daytonaio/sdk'
import { createHash, randomBytes } from 'node:crypto'

function check(cond, what) {
  if (!cond) {
    throw new Error('check failed: ' + what)
  }
}

async function step(name, fn) {
  const start = Date.now()
  await fn()
  console.log(`ok ${name} (${Date.now() - start} ms)`)
}

async function rejects(fn, what) {
  try {
    await fn()
  } catch (err) {
    return err
  }
  throw new Error('check failed: ' + what + ' did not fail')
}

const run = randomBytes(6).toString('hex')
const daytona = new Daytona()
let sandbox

await step('create with labels, env and autoStopInterval', async () => {
  sandbox = await daytona.create({
    labels: { suite: 'sdk-flow', run },
    envVars: { FLOW_VAR: 'from-create' },
    autoStopInterval: 30,
  })
  check(sandbox.state === 'started', `state ${sandbox.state}`)
  check(sandbox.labels.run === run, 'labels kept')
  check(sandbox.autoStopInterval === 30, `autoStopInterval ${sandbox.autoStopInterval}`)
})

await step('process.executeCommand: output, cwd, env, exit codes, timeout', async () => {
  let res = await sandbox.process.executeCommand('echo hello; echo $FLOW_VAR')
  check(res.exitCode === 0, `exit ${res.exitCode}`)
  check(res.result === 'hello\nfrom-create\n', `result ${JSON.stringify(res.result)}`)
  res = await sandbox.process.executeCommand('pwd', '/tmp')
  check(res.result.trim() === '/tmp', `cwd ${JSON.stringify(res.result)}`)
  res = await sandbox.process.executeCommand('echo $A-$B', undefined, { A: 'one', B: 'two' })
  check(res.result.trim() === 'one-two', `env ${JSON.stringify(res.result)}`)
  res = await sandbox.process.executeCommand('echo bad >&2; exit 7')
  check(res.exitCode === 7, `non-zero exit ${res.exitCode}`)
  check(res.result.includes('bad'), 'stderr in result')
  const err = await rejects(() => sandbox.process.executeCommand('sleep 30', undefined, undefined, 1), 'a command past its timeout')
  check(/timeout/i.test(String(err.message)), `timeout error: ${err.message}`)
})

await step('session: async command streams its logs while it runs, then its exit code', async () => {
  const sid = 'flow-' + run
  await sandbox.process.createSession(sid)
  await sandbox.process.executeSessionCommand(sid, { command: 'cd /tmp && export SESSION_VAR=kept' })
  const { cmdId } = await sandbox.process.executeSessionCommand(sid, {
    command: 'for i in 1 2 3; do echo "tick $i $SESSION_VAR $(pwd)"; sleep 0.3; done; echo oops >&2; exit 3',
    runAsync: true,
  })
  check(cmdId, 'async command id')
  const running = await sandbox.process.getSessionCommand(sid, cmdId)
  check(running.exitCode === undefined || running.exitCode === null, 'no exit code while it runs')
  let out = ''
  let err = ''
  let firstAt = 0
  const started = Date.now()
  await sandbox.process.getSessionCommandLogs(sid, cmdId, (s) => { if (!firstAt) firstAt = Date.now(); out += s }, (s) => { err += s })
  check(out === 'tick 1 kept /tmp\ntick 2 kept /tmp\ntick 3 kept /tmp\n', `stdout ${JSON.stringify(out)}`)
  check(err === 'oops\n', `stderr ${JSON.stringify(err)}`)
  check(firstAt - started < 600, `first output after ${firstAt - started} ms: it must stream while the command runs`)
  const done = await sandbox.process.getSessionCommand(sid, cmdId)
  check(done.exitCode === 3, `exit code ${done.exitCode}`)
  const logs = await sandbox.process.getSessionCommandLogs(sid, cmdId)
  check(logs.stdout.includes('tick 3') && logs.stderr === 'oops\n', 'logs after the end')
  const sync = await sandbox.process.executeSessionCommand(sid, { command: 'echo sync; echo e >&2' })
  check(sync.exitCode === 0 && sync.stdout === 'sync\n' && sync.stderr === 'e\n', `sync exec ${JSON.stringify(sync)}`)
  await sandbox.process.deleteSession(sid)
})

await step('fs: upload and download text, several files, 50 MiB binary', async () => {
  await sandbox.fs.uploadFile(Buffer.from('hello file\n'), '/workspace/flow/a.txt')
  const text = await sandbox.fs.downloadFile('/workspace/flow/a.txt')
  check(text.toString() === 'hello file\n', 'text round trip')
  await sandbox.fs.uploadFiles([
    { source: Buffer.from('one\nTODO: first\n'), destination: '/workspace/flow/src/one.txt' },
    { source: Buffer.from('two\nTODO: second\n'), destination: '/workspace/flow/src/two.md' },
  ])
  const big = randomBytes(50 << 20)
  const t0 = Date.now()
  await sandbox.fs.uploadFile(big, '/workspace/flow/big.bin')
  const t1 = Date.now()
  const back = await sandbox.fs.downloadFile('/workspace/flow/big.bin')
  const t2 = Date.now()
  const sum = (b) => createHash('sha256').update(b).digest('hex')
  check(back.length === big.length && sum(back) === sum(big), '50 MiB round trip')
  console.log(`  50 MiB: upload ${t1 - t0} ms, download ${t2 - t1} ms`)
  const many = await sandbox.fs.downloadFiles([
    { source: '/workspace/flow/src/one.txt' },
    { source: '/workspace/flow/missing.txt' },
  ])
  check(many[0].result.toString() === 'one\nTODO: first\n', 'downloadFiles content')
  check(many[1].error && !many[1].result, 'downloadFiles reports the missing file')
  await rejects(() => sandbox.fs.downloadFile('/workspace/flow/missing.txt'), 'downloading a missing file')
})

await step('fs: list, details, folder, move, delete, find, search, replace', async () => {
  const list = await sandbox.fs.listFiles('/workspace/flow')
  const names = list.map((f) => f.name).sort()
  check(JSON.stringify(names) === JSON.stringify(['a.txt', 'big.bin', 'src']), `listFiles ${names}`)
  const info = await sandbox.fs.getFileDetails('/workspace/flow/a.txt')
  check(info.size === 11 && !info.isDir && info.name === 'a.txt', `getFileDetails ${JSON.stringify(info)}`)
  await sandbox.fs.createFolder('/workspace/flow/new/deep', '755')
  check((await sandbox.fs.getFileDetails('/workspace/flow/new/deep')).isDir, 'createFolder')
  await sandbox.fs.moveFiles('/workspace/flow/a.txt', '/workspace/flow/new/a.txt')
  check((await sandbox.fs.downloadFile('/workspace/flow/new/a.txt')).toString() === 'hello file\n', 'moveFiles')
  await sandbox.fs.deleteFile('/workspace/flow/new', true)
  await rejects(() => sandbox.fs.getFileDetails('/workspace/flow/new'), 'details of a deleted folder')
  const found = await sandbox.fs.findFiles('/workspace/flow/src', 'TODO:')
  check(found.length === 2 && found.every((m) => m.line === 2 && m.content.startsWith('TODO:')), `findFiles ${JSON.stringify(found)}`)
  const searched = await sandbox.fs.searchFiles('/workspace/flow', '*.md')
  check(JSON.stringify(searched.files) === JSON.stringify(['/workspace/flow/src/two.md']), `searchFiles ${JSON.stringify(searched)}`)
  const replaced = await sandbox.fs.replaceInFiles(['/workspace/flow/src/one.txt', '/workspace/flow/src/two.md'], 'TODO:', 'DONE:')
  check(replaced.length === 2 && replaced.every((r) => r.success), `replaceInFiles ${JSON.stringify(replaced)}`)
  check((await sandbox.fs.downloadFile('/workspace/flow/src/one.txt')).toString() === 'one\nDONE: first\n', 'replaced content')
})

await step('list by labels, get', async () => {
  const found = []
  for await (const sb of daytona.list({ labels: { run } })) {
    found.push(sb.id)
  }
  check(found.length === 1 && found[0] === sandbox.id, `list ${found}`)
  const none = []
  for await (const sb of daytona.list({ labels: { run: 'no-such-run' } })) {
    none.push(sb.id)
  }
  check(none.length === 0, 'list with another label finds nothing')
  const got = await daytona.get(sandbox.id)
  check(got.id === sandbox.id && got.labels.suite === 'sdk-flow', 'get')
})

await step('stop and start: files stay', async () => {
  await sandbox.stop()
  check(sandbox.state === 'stopped', `state after stop ${sandbox.state}`)
  await sandbox.start()
  check(sandbox.state === 'started', `state after start ${sandbox.state}`)
  const text = await sandbox.fs.downloadFile('/workspace/flow/src/two.md')
  check(text.toString() === 'two\nDONE: second\n', 'a file survives stop and start')
})

await step('delete', async () => {
  await daytona.delete(sandbox)
  await rejects(() => daytona.get(sandbox.id), 'get after delete')
})

console.log('sdk flow passed')
