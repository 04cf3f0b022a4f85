/**
 * What an answer that carries its output inline costs the poller: one poll of
 * a completed Omni video interaction whose video comes back as base64 in
 * `steps[]` (the default unless `response_format` asks for a URI), through
 * the real @google/genai against the fake Gemini, by the video's size: the
 * poll's time and the heap it grew by while reading. The same poll of the
 * same interaction delivered by URI is the baseline.
 */

import { FakeGemini } from '../local/fake-gemini.ts';
import { GenAiPoller } from '../providers/gemini/poller.ts';

const SIZES_MIB = [0, 5, 15, 45];
const RUNS = 5;

export async function benchInlineAnswers(): Promise<void> {
  const gemini = await new FakeGemini('bench-key').start();
  const poller = new GenAiPoller({ gemini: { apiKey: gemini.apiKey, baseUrl: gemini.baseUrl } });
  console.log('\n## Inline answers: one poll of a completed Omni video interaction (median of 5)\n');
  console.log('| video | answer | poll p50 | poll max | heap grown, max |');
  console.log('|---|---|---|---|---|');
  try {
    for (const mib of SIZES_MIB) {
      const name = `interactions/bench-${mib}`;
      const content =
        mib === 0
          ? { type: 'video', mime_type: 'video/mp4', uri: 'files/clip' }
          : { type: 'video', mime_type: 'video/mp4', data: Buffer.alloc(mib * 1_048_576, 7).toString('base64') };
      gemini.interactions.set(name, {
        status: 'completed',
        updated: '2026-12-01T10:00:00Z',
        steps: [{ type: 'model_output', content: [content] }],
      });
      const times: number[] = [];
      let grown = 0;
      for (let run = 0; run < RUNS; run++) {
        globalThis.gc?.();
        const before = process.memoryUsage().heapUsed;
        let peak = before;
        const sampler = setInterval(() => {
          peak = Math.max(peak, process.memoryUsage().heapUsed);
        }, 5);
        const started = performance.now();
        const answer = await poller.poll({ name, kind: 'interaction' });
        times.push(performance.now() - started);
        clearInterval(sampler);
        peak = Math.max(peak, process.memoryUsage().heapUsed);
        grown = Math.max(grown, peak - before);
        if (answer.kind !== 'event' || answer.event.state !== 'SUCCEEDED') throw new Error(`unexpected answer for ${name}`);
      }
      times.sort((a, b) => a - b);
      const answerMib = mib === 0 ? 'by URI' : `${((mib * 4) / 3).toFixed(0)} MiB`;
      console.log(
        `| ${mib === 0 ? 'by URI' : `${mib} MiB inline`} | ${answerMib} | ${Math.round(times[Math.floor(RUNS / 2)] ?? 0)} ms | ${Math.round(times.at(-1) ?? 0)} ms | ${Math.round(grown / 1_048_576)} MiB |`,
      );
    }
  } finally {
    await gemini.stop();
  }
}
