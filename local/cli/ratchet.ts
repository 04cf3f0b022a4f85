/**
 * `ratchet <command>`: the server package's one bin, and what every `npm run`
 * script of this repository calls. Each command is its own module, loaded only
 * when named, so `ratchet webhook` never loads the engine. The commands that
 * reach a deployed AWS stack are `ratchet-aws`'s (lib/cli/ratchet-aws.ts, in
 * @ratchet/cdk): this package carries no AWS SDK.
 */
import { runProgram } from '../../app/command-line.ts';

await runProgram({
  name: 'ratchet',
  commands: {
    start: { about: 'run Ratchet on this machine (the embedded engine in ./.ratchet-data or DATA_DIR)', load: () => import('../start.ts') },
    demo: { about: 'the whole system with a fake Gemini, playing an out-of-order story', load: () => import('./demo.ts') },
    webhook: {
      about: "send one signed delivery to a running Ratchet, in Gemini's shape or (--provider openai|azure-openai) OpenAI's",
      load: () => import('./webhook.ts'),
    },
    redrive: { about: 'list or re-drive dead-lettered effects of the running Ratchet', load: () => import('./redrive.ts') },
    backup: { about: 'a consistent copy of the data folder while Ratchet runs', load: () => import('./backup.ts') },
    login: { about: 'a new one-time link that signs the console in', load: () => import('./login.ts') },
    migrate: { about: 'bring the PostgreSQL schema (DATABASE_URL) to this version, then exit', load: () => import('./migrate.ts') },
  },
  footer: `ratchet <command> --help says more about each; ratchet --version says which Ratchet this is.
Configuration is by environment variable (docs/contract.md). A stack on AWS: npx ratchet-aws (@ratchet/cdk).`,
  elsewhere: { connect: "ratchet-aws's, for a deployed stack: npx ratchet-aws connect --stack NAME (@ratchet/cdk)" },
  manifests: ['ratchet', '@ratchet/server'],
  from: import.meta.dirname,
});
