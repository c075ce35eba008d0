// Measures Runloop's official TypeScript SDK against whatever
// RUNLOOP_BASE_URL and RUNLOOP_API_KEY point at: the median time from
// starting `echo x` with a stdout callback (execAsync and its SSE stream,
// the SDK's way to stream) to the first callback, and the median
// throughput of file.upload of 50 MiB. Prints one JSON object.
import { randomBytes } from 'node:crypto';
import { RunloopSDK, toFile } from '@runloop/api-client';

const runs = Number(process.env.BENCH_RUNS || 20);
const uploads = Number(process.env.BENCH_UPLOADS || 5);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const sdk = new RunloopSDK();
const devbox = await sdk.devbox.create({ metadata: { bench: 'sdk' } });
try {
  const firsts = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    let first;
    await devbox.cmd.exec('echo x', { stdout: () => { first ??= performance.now(); } });
    firsts.push(first - t0);
  }
  const size = 50 << 20;
  const buf = randomBytes(size);
  const rates = [];
  for (let i = 0; i < uploads; i++) {
    const t0 = performance.now();
    await devbox.file.upload({ path: '~/upload.bin', file: await toFile(buf, 'upload.bin') });
    rates.push(size / 1e6 / ((performance.now() - t0) / 1000));
  }
  console.log(JSON.stringify({ first_output_ms: median(firsts), upload_mb_s: median(rates), runs, uploads }));
} finally {
  await devbox.shutdown();
}
