// What each installed app does with @ratchet/client, whichever way it loaded it (app.mjs: import, app.cjs: require):
// refuse a URL that is not http(s), then track a job, read it, wait for its end, and verify the signed effect sent for it.
const { createServer } = require('node:http');

module.exports = async function flow({ RatchetClient, RatchetError, verifyEffect }, app) {
  const { RATCHET_URL, JOB, EFFECTS_SIGNING_SECRET, RECEIVER_PORT } = process.env;
  try {
    new RatchetClient({ url: 'ftp://ratchet.example' });
  } catch (error) {
    console.log(`bad url: ${error instanceof RatchetError} ${error.code}: ${error.message}`);
  }

  const effects = [];
  const receiver = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    try {
      effects.push(verifyEffect(req.headers, body, EFFECTS_SIGNING_SECRET));
      res.writeHead(204).end();
    } catch {
      res.writeHead(400).end();
    }
  });
  await new Promise((resolve) => receiver.listen(Number(RECEIVER_PORT), '127.0.0.1', resolve));

  const ratchet = new RatchetClient({ url: RATCHET_URL });
  const { created } = await ratchet.track(JOB, { metadata: { app } });
  console.log(`tracked ${JOB} (created: ${created})`);
  console.log(`read ${JOB}: ${(await ratchet.get(JOB)).state ?? 'not yet observed'}`);
  const done = await ratchet.waitFor(JOB, { until: 'terminal', timeoutMs: 60_000 });
  console.log(`${JOB} ended ${done.state}`);
  const deadline = Date.now() + 30_000;
  const ours = () => effects.find((e) => e.data.name === JOB && e.data.state === done.state);
  while (!ours() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  const effect = ours();
  console.log(effect ? `verified effect ${effect.id} -> ${effect.data.state} ${JSON.stringify(effect.data.userMetadata)}` : 'no effect');
  receiver.close();
  return effect ? 0 : 1;
};
