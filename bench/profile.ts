/**
 * `node --import tsx bench/profile.ts [mix]`: where the embedded engine's time goes. Starts
 * `local/start.ts` under --cpu-prof with the outbound sink on, plays one mix (BENCH_SIZE
 * deliveries, default 3000) from this process, stops it, and prints the heaviest functions and
 * files by self time. BENCH_PROFILE_SINK=off runs without the sink; BENCH_PROFILE_WAITERS=1000
 * holds that many long polls (and a tenth as many change streams) meanwhile.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { newSecret } from '../test/support/deliveries.ts';
import { Receiver } from '../test/support/receiver.ts';
import { mixes, playMix } from './mixes.ts';
import { startProcess, stopProcess } from './processes.ts';

const root = resolve(import.meta.dirname, '..');
const which = Number(process.argv[2] ?? 0);
const size = Number(process.env.BENCH_SIZE ?? 3000);
const secret = newSecret();
const outbound = newSecret();
const receiver = await new Receiver(outbound).start();
const work = mkdtempSync(join(tmpdir(), 'ratchet-profile-'));
const profiles = join(work, 'profiles');
const sinkOn = process.env.BENCH_PROFILE_SINK !== 'off';
const ratchet = await startProcess(
  [process.execPath, '--cpu-prof', `--cpu-prof-dir=${profiles}`, '--import', 'tsx', 'local/start.ts'],
  {
    DATA_DIR: join(work, 'data'),
    PORT: '0',
    WEBHOOK_SIGNING_SECRETS: secret,
    RATCHET_API_TOKEN: 'profile-api-token-0123456789abcdef',
    ...(sinkOn && { EFFECTS_WEBHOOK_URL: receiver.url, EFFECTS_SIGNING_SECRET: outbound }),
  },
  /Ratchet ready at (http:\/\/\S+) /,
  root,
);
const url = `${ratchet.url}/webhooks/gemini`;
// BENCH_PROFILE_WAITERS=N: N per-operation long polls (on operations the mix never touches) and N/10 change streams held meanwhile.
const waiters = Number(process.env.BENCH_PROFILE_WAITERS ?? 0);
const holding = new AbortController();
const auth = { authorization: 'Bearer profile-api-token-0123456789abcdef' };
for (let i = 0; i < waiters; i++) {
  await fetch(`${ratchet.url}/operations`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `batches/idle-${i}` }),
  });
  void fetch(`${ratchet.url}/operations/batches/idle-${i}?wait=60`, { headers: auth, signal: holding.signal }).catch(() => undefined);
  if (i % 10 === 0)
    void fetch(`${ratchet.url}/changes/stream?kind=video`, { headers: auth, signal: holding.signal }).catch(() => undefined);
}
await playMix(url, secret, mixes('warm', 500)[which] as never);
const mix = mixes('profile', size)[which];
if (!mix) throw new Error('mix: 0, 1 or 2');
const played = await playMix(url, secret, mix);
await new Promise((r) => setTimeout(r, 1000));
holding.abort();
console.log(
  `${mix.label}: ${played.perSecond.toFixed(0)} deliveries/s, p50 ${played.p50.toFixed(1)} ms; effects received ${receiver.accepted.length}`,
);
await stopProcess(ratchet);
await receiver.stop();

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const file = readdirSync(profiles).find((f) => f.endsWith('.cpuprofile'));
if (!file) throw new Error('no profile written');
const profile = JSON.parse(readFileSync(join(profiles, file), 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const self = new Map<number, number>();
for (const [i, id] of profile.samples.entries()) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
for (const node of profile.nodes) {
  const t = self.get(node.id) ?? 0;
  const where = node.callFrame.url.replace(/^file:\/\//, '').replace(`${root}/`, '') || '(native)';
  const fn = `${node.callFrame.functionName || '(anonymous)'} ${where}:${node.callFrame.lineNumber + 1}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + t);
  const pkg = where.match(/node_modules\/((@[^/]+\/)?[^/]+)/)?.[1] ?? where.split('/').slice(0, 2).join('/');
  byFile.set(pkg, (byFile.get(pkg) ?? 0) + t);
}
const top = (m: Map<string, number>, n: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${((100 * v) / total).toFixed(1).padStart(5)} %  ${k}`);
// Inclusive time: each function's own samples and its callees', counted once per stack.
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const inclusive = new Map<string, number>();
for (const [id, t] of self) {
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const frame = (byId.get(at) as Node).callFrame;
    const where = frame.url.replace(/^file:\/\//, '').replace(`${root}/`, '');
    const key = `${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber + 1}`;
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + t);
  }
}
console.log('\nby function, inclusive (our code):');
console.log(top(new Map([...inclusive].filter(([k]) => /(lambda|local|sdk)\//.test(k) && !k.includes('node_modules'))), 45).join('\n'));
console.log('\nby package or folder (self time):');
console.log(top(byFile, 25).join('\n'));
console.log('\nby function (self time):');
console.log(top(byFunction, 40).join('\n'));
rmSync(work, { recursive: true, force: true });
