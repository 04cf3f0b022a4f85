// A CommonJS app: `node app.cjs`, the packages loaded with require() (Node's require(esm), Node >= 20.19).
const { RatchetClient, RatchetError } = require('@ratchet/client');
const { verifyEffect } = require('@ratchet/client/receiver');
const flow = require('./flow.cjs');

flow({ RatchetClient, RatchetError, verifyEffect }, 'cjs').then((code) => process.exit(code));
