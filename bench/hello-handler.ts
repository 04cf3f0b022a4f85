/** The cold-start floor (bench/aws-path.ts): a handler that does nothing, bundled and timed like Ratchet's functions. */
export const handler = async () => ({ statusCode: 200, body: 'hello' });
