import { ratchet } from '../../../lib/ratchet.js';

export const dynamic = 'force-dynamic';
// What Vercel Cron calls (with Authorization: Bearer $CRON_SECRET).
export const GET = async (request) => {
  if (request.headers.get('authorization') !== `Bearer ${process.env.CRON_SECRET}`) return new Response(null, { status: 401 });
  return Response.json(await ratchet.tick({ budgetMs: 5_000 }));
};
