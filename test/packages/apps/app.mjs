// A plain JavaScript app: ESM, `node app.mjs`, no loader.
import { RatchetClient, RatchetError } from '@ratchet/client';
import { verifyEffect } from '@ratchet/client/receiver';
import flow from './flow.cjs';

process.exit(await flow({ RatchetClient, RatchetError, verifyEffect }, 'esm'));
