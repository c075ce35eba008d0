// Drives the official E2B JavaScript SDK, unchanged, through a sandbox's
// whole life against whatever E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// point at (the emulator, `sandbox serve --api e2b`, in this project's
// tests). Every step asserts what it got; the first failure exits non-zero
// with the step's name.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { CommandExitError, Sandbox, TimeoutError } from 'e2b'

const work = '/workspace'
const run = randomBytes(4).toString('hex')
const metadata = { suite: 'sdk-conformance', run }

let current = 'start'
async function step(name, fn) {
  current = name
  const t0 = Date.now()
  await fn()
  console.log(`ok - ${name} (${Date.now() - t0} ms)`)
}

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')

async function waitUntil(what, cond, ms = 10_000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.fail(`timed out waiting until ${what}`)
}

async function main() {
  let sbx
  await step('Sandbox.create with metadata and envs', async () => {
    sbx = await Sandbox.create({ metadata, envs: { SDK_CREATE_ENV: 'from-create' }, timeoutMs: 300_000 })
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.deepEqual(info.metadata, metadata)
    assert.equal(info.state, 'running')
  })

  try {
    await flow(sbx)
  } finally {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  }
}

async function flow(sbx) {
  await step('commands.run with streaming callbacks, exit 0', async () => {
    const out = []
    const err = []
    const r = await sbx.commands.run('echo hello; echo oops >&2', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hello\n')
    assert.equal(r.stderr, 'oops\n')
    assert.equal(out.join(''), 'hello\n')
    assert.equal(err.join(''), 'oops\n')
  })

  await step('commands.run streams output while the command runs', async () => {
    const seen = []
    const t0 = Date.now()
    await sbx.commands.run('echo first; sleep 1.5; echo second', {
      onStdout: (d) => seen.push([d, Date.now() - t0]),
    })
    assert.equal(seen.map(([d]) => d).join(''), 'first\nsecond\n')
    const firstAt = seen[0][1]
    const lastAt = seen[seen.length - 1][1]
    assert.ok(lastAt - firstAt >= 1000, `first output at ${firstAt} ms, last at ${lastAt} ms: not streamed`)
  })

  await step('commands.run non-zero exit throws CommandExitError', async () => {
    await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e?.constructor?.name}: ${e}`)
      assert.equal(e.exitCode, 3)
      assert.equal(e.stdout, 'partial\n')
      return true
    })
  })

  await step('commands.run sees sandbox envs and per-command envs', async () => {
    const r = await sbx.commands.run('echo "$SDK_CREATE_ENV $SDK_CMD_ENV"', { envs: { SDK_CMD_ENV: 'per-command' } })
    assert.equal(r.stdout, 'from-create per-command\n')
    const again = await sbx.commands.run('echo "[$SDK_CMD_ENV]"')
    assert.equal(again.stdout, '[]\n', 'per-command envs must not persist')
  })

  await step('commands.run in a cwd', async () => {
    assert.equal(await sbx.files.makeDir(`${work}/cwd/nested`), true)
    const r = await sbx.commands.run('pwd', { cwd: `${work}/cwd/nested` })
    assert.equal(r.stdout, `${work}/cwd/nested\n`)
  })

  await step('commands stdin: sendStdin then closeStdin', async () => {
    const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true })
    await sbx.commands.sendStdin(h.pid, 'line one\n')
    await h.sendStdin('line two\n')
    await sbx.commands.closeStdin(h.pid)
    const r = await h.wait()
    assert.equal(r.stdout, 'line one\nline two\ndone\n')
  })

  await step('commands.run with a timeout', async () => {
    const t0 = Date.now()
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }), (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e?.constructor?.name}: ${e}`)
      return true
    })
    assert.ok(Date.now() - t0 < 10_000, `timeout took ${Date.now() - t0} ms`)
    const after = await sbx.commands.run('echo still-usable')
    assert.equal(after.stdout, 'still-usable\n')
  })

  await step('background command listed, then killed', async () => {
    const h = await sbx.commands.run('sleep 120', { background: true })
    assert.ok(h.pid > 0)
    const listed = await sbx.commands.list()
    assert.ok(listed.some((p) => p.pid === h.pid), `pid ${h.pid} not in ${JSON.stringify(listed)}`)
    assert.equal(await sbx.commands.kill(h.pid), true)
    await assert.rejects(h.wait(), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e?.constructor?.name}: ${e}`)
      assert.notEqual(e.exitCode, 0)
      return true
    })
    await waitUntil('the killed command leaves the process list', async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid))
    assert.equal(await sbx.commands.kill(h.pid), false, 'killing a finished command reports false')
  })

  await step('files write/read text', async () => {
    const text = 'hello from the official SDK\nsecond line ✓\n'
    const info = await sbx.files.write(`${work}/hello.txt`, text)
    assert.equal(info.path, `${work}/hello.txt`)
    assert.equal(await sbx.files.read(`${work}/hello.txt`), text)
    const r = await sbx.commands.run(`cat ${work}/hello.txt`)
    assert.equal(r.stdout, text)
  })

  await step('files write/read 50 MiB of binary', async () => {
    const data = randomBytes(50 << 20)
    await sbx.files.write(`${work}/big.bin`, data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength))
    const back = await sbx.files.read(`${work}/big.bin`, { format: 'bytes' })
    assert.equal(back.length, data.length)
    assert.equal(sha256(back), sha256(data))
    const r = await sbx.commands.run(`wc -c < ${work}/big.bin`)
    assert.equal(r.stdout.trim(), String(50 << 20))
  })

  await step('files getInfo, stream read, and a multi-file write', async () => {
    const info = await sbx.files.getInfo(`${work}/hello.txt`)
    assert.equal(info.type, 'file')
    assert.equal(info.name, 'hello.txt')
    assert.equal(info.size, Buffer.byteLength('hello from the official SDK\nsecond line ✓\n'))
    assert.ok(info.modifiedTime instanceof Date && !isNaN(info.modifiedTime))
    const dir = await sbx.files.getInfo(work)
    assert.equal(dir.type, 'dir')

    const stream = await sbx.files.read(`${work}/hello.txt`, { format: 'stream' })
    const chunks = []
    for await (const c of stream) chunks.push(Buffer.from(c))
    assert.equal(Buffer.concat(chunks).toString(), 'hello from the official SDK\nsecond line ✓\n')

    const written = await sbx.files.write([
      { path: `${work}/multi/one.txt`, data: 'one' },
      { path: `${work}/multi/deeper/two.txt`, data: 'two' },
    ])
    assert.deepEqual(written.map((w) => w.path).sort(), [`${work}/multi/deeper/two.txt`, `${work}/multi/one.txt`])
    assert.equal(await sbx.files.read(`${work}/multi/deeper/two.txt`), 'two')
    await assert.rejects(sbx.files.read(`${work}/multi/missing.txt`))
  })

  await step('files list, exists, makeDir, rename, remove', async () => {
    const names = (await sbx.files.list(work)).map((e) => e.name)
    for (const n of ['hello.txt', 'big.bin', 'cwd', 'multi']) assert.ok(names.includes(n), `${n} not in ${names}`)
    const entry = (await sbx.files.list(work)).find((e) => e.name === 'hello.txt')
    assert.equal(entry.type, 'file')
    assert.equal(entry.path, `${work}/hello.txt`)
    const dir = (await sbx.files.list(work)).find((e) => e.name === 'cwd')
    assert.equal(dir.type, 'dir')

    assert.equal(await sbx.files.exists(`${work}/hello.txt`), true)
    assert.equal(await sbx.files.exists(`${work}/nope.txt`), false)

    assert.equal(await sbx.files.makeDir(`${work}/made/deep`), true)
    assert.equal(await sbx.files.makeDir(`${work}/made/deep`), false, 'makeDir of an existing dir returns false')

    const moved = await sbx.files.rename(`${work}/hello.txt`, `${work}/made/renamed.txt`)
    assert.equal(moved.path, `${work}/made/renamed.txt`)
    assert.equal(await sbx.files.exists(`${work}/hello.txt`), false)
    assert.equal(await sbx.files.read(`${work}/made/renamed.txt`), 'hello from the official SDK\nsecond line ✓\n')

    await sbx.files.remove(`${work}/made`)
    assert.equal(await sbx.files.exists(`${work}/made`), false)
    await sbx.files.remove(`${work}/big.bin`)
    assert.equal(await sbx.files.exists(`${work}/big.bin`), false)
  })

  await step('Sandbox.list filtered by metadata', async () => {
    const mine = await Sandbox.list({ query: { metadata } }).nextItems()
    assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
    assert.deepEqual(mine[0].metadata, metadata)
    const other = await Sandbox.list({ query: { metadata: { ...metadata, run: 'not-this-run' } } }).nextItems()
    assert.equal(other.length, 0)
  })

  await step('Sandbox.list pages', async () => {
    const second = await Sandbox.create({ metadata: { ...metadata, second: 'yes' } })
    try {
      const pages = Sandbox.list({ query: { metadata: { run } }, limit: 1 })
      const seen = []
      while (pages.hasNext) {
        const items = await pages.nextItems()
        assert.ok(items.length <= 1, `a page of ${items.length} with limit 1`)
        seen.push(...items.map((s) => s.sandboxId))
      }
      assert.deepEqual(seen.sort(), [sbx.sandboxId, second.sandboxId].sort())
    } finally {
      await second.kill()
    }
  })

  await step('Sandbox.connect by id', async () => {
    await sbx.files.write(`${work}/marker.txt`, 'connected')
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal(again.sandboxId, sbx.sandboxId)
    const r = await again.commands.run(`cat ${work}/marker.txt`)
    assert.equal(r.stdout, 'connected')
  })

  await step('setTimeout', async () => {
    await sbx.setTimeout(90_000)
    const info = await sbx.getInfo()
    const left = info.endAt.getTime() - Date.now()
    assert.ok(left > 60_000 && left <= 95_000, `endAt is ${left} ms away, want about 90 s`)
  })

  await step('kill', async () => {
    await sbx.kill()
    const mine = await Sandbox.list({ query: { metadata } }).nextItems()
    assert.equal(mine.length, 0)
    await assert.rejects(Sandbox.connect(sbx.sandboxId))
    assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'killing a killed sandbox reports false')
  })
}

main().then(
  () => console.log('sdk-flow: all steps passed'),
  (err) => {
    console.error(`not ok - ${current}`)
    console.error(err)
    process.exit(1)
  },
)
