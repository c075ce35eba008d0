// Measures Daytona's official TypeScript SDK against whatever
// DAYTONA_API_URL and DAYTONA_API_KEY point at: the median time from
// starting `echo x` as a session command (runAsync, its logs followed
// with callbacks, the SDK's way to stream) to its first stdout callback,
// and the median throughput of fs.uploadFile of 50 MiB. Prints one JSON
// object.
import { randomBytes } from 'node:crypto'
import { Daytona } from '@daytonaio/sdk'

const runs = Number(process.env.BENCH_RUNS || 20)
const uploads = Number(process.env.BENCH_UPLOADS || 5)
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const daytona = new Daytona()
const sbx = await daytona.create({ labels: { bench: 'sdk' } })
try {
  const sid = 'bench'
  await sbx.process.createSession(sid)
  const firsts = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    let first
    const { cmdId } = await sbx.process.executeSessionCommand(sid, { command: 'echo x', runAsync: true })
    await sbx.process.getSessionCommandLogs(sid, cmdId, () => { first ??= performance.now() }, () => {})
    firsts.push(first - t0)
  }
  const size = 50 << 20
  const buf = randomBytes(size)
  const rates = []
  for (let i = 0; i < uploads; i++) {
    const t0 = performance.now()
    await sbx.fs.uploadFile(buf, '/workspace/upload.bin')
    rates.push(size / 1e6 / ((performance.now() - t0) / 1000))
  }
  console.log(JSON.stringify({ first_output_ms: median(firsts), upload_mb_s: median(rates), runs, uploads }))
} finally {
  await daytona.delete(sbx)
}
