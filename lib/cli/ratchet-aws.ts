/**
 * `ratchet-aws <command>`: the commands that reach a deployed stack, shipped
 * in @ratchet/cdk beside the construct (`npx ratchet-aws connect --stack
 * NAME`); in this repository `npm run connect` and `npm run aws -- …`. AWS
 * credentials and region come from the environment, as for `cdk deploy`.
 */
import { runProgram } from '../../app/command-line.ts';

await runProgram({
  name: 'ratchet-aws',
  commands: {
    connect: { about: 'connect a deployed stack to Gemini (webhook, secrets, ping)', load: () => import('./connect.ts') },
    'backfill-list': {
      about: 'once after upgrading: list every operation recorded before GET /operations read the history table',
      load: () => import('./backfill-list.ts'),
    },
    redrive: { about: "list or re-drive a deployed stack's dead-lettered effects", load: () => import('./redrive.ts') },
  },
  footer: 'ratchet-aws <command> --help says more about each. Ratchet on one machine is the ratchet command (@ratchet/server).',
  manifests: ['ratchet', '@ratchet/cdk'],
  from: import.meta.dirname,
});
