// Measures the official E2B SDK against whatever E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY point at: the median time from
// commands.run('echo x') to its first stdout callback, and the median
// throughput of files.write of 50 MiB. Prints one JSON object.
import { randomBytes } from 'node:crypto'
import { Sandbox } from 'e2b'

const runs = Number(process.env.BENCH_RUNS || 20)
const uploads = Number(process.env.BENCH_UPLOADS || 5)
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const sbx = await Sandbox.create({ metadata: { bench: 'sdk' } })
try {
  await sbx.commands.run('true')
  const firsts = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    let first
    await sbx.commands.run('echo x', { onStdout: () => { first ??= performance.now() } })
    firsts.push(first - t0)
  }
  const size = 50 << 20
  const buf = randomBytes(size)
  const data = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  const rates = []
  for (let i = 0; i < uploads; i++) {
    const t0 = performance.now()
    await sbx.files.write('/workspace/upload.bin', data)
    rates.push(size / 1e6 / ((performance.now() - t0) / 1000))
  }
  console.log(JSON.stringify({ first_output_ms: median(firsts), upload_mb_s: median(rates), runs, uploads }))
} finally {
  await sbx.kill()
}
