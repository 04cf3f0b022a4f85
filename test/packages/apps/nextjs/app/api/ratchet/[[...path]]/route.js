import { ratchet } from '../../../../lib/ratchet.js';

export const dynamic = 'force-dynamic';
export const GET = (request) => ratchet.fetch(request);
export const POST = GET;
