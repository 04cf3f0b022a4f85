/**
 * Each package installed alone into an empty app, from its tarball, as a user
 * installs it: what comes with it, and what must not. (The server's own
 * install is apps.test.ts's, which then runs it.)
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type FreshApp, freshApp } from '../support/fresh-app.ts';

const tarballs = inject('tarballs');
const apps: FreshApp[] = [];
afterAll(() => {
  for (const app of apps) app.remove();
});

async function installAlone(pkg: string) {
  const app = await freshApp(`install-${pkg}`, [tarballs[pkg] as string]);
  apps.push(app);
  const installed = app.installed();
  console.log(`@ratchet/${pkg} installed alone: ${installed.packages.length} packages, ${Math.round(installed.kilobytes)} KB on disk`);
  return installed;
}

const heavy = (packages: string[], names: RegExp) => packages.filter((p) => names.test(p));

describe('installed alone from its tarball', () => {
  it('the client (with the receiver) is at most 4 packages and 500 KB, none of them the AWS SDK, CDK, SQLite, the Gemini SDK or a build tool', async () => {
    const { packages, kilobytes } = await installAlone('client');
    expect(packages).toContain('@ratchet/client');
    expect(packages.length).toBeLessThanOrEqual(4);
    expect(kilobytes).toBeLessThanOrEqual(500);
    expect(
      heavy(
        packages,
        /^@aws-sdk\/|^@smithy\/|^aws-cdk-lib$|^constructs$|^libsql$|^@libsql\/|^@google\/genai$|^esbuild$|^typescript$|^tsx$|^zod$/,
      ),
    ).toEqual([]);
  });

  it('trackJobs brings @google/genai as its peer, and nothing of the server or the AWS SDK', async () => {
    const { packages } = await installAlone('genai');
    expect(packages).toContain('@ratchet/genai');
    expect(packages).toContain('@google/genai');
    expect(heavy(packages, /^@aws-sdk\/|^aws-cdk-lib$|^libsql$|^esbuild$|^typescript$|^tsx$|^@ratchet\/(client|server|cdk)$/)).toEqual([]);
  });

  it('trackJobs for OpenAI brings openai as its peer, and nothing of the server, the Gemini SDK or the AWS SDK', async () => {
    const { packages } = await installAlone('openai');
    expect(packages).toEqual(expect.arrayContaining(['@ratchet/openai', 'openai']));
    expect(
      heavy(
        packages,
        /^@aws-sdk\/|^aws-cdk-lib$|^libsql$|^esbuild$|^typescript$|^tsx$|^@google\/genai$|^@anthropic-ai\/sdk$|^@ratchet\/(client|server|cdk)$/,
      ),
    ).toEqual([]);
  });

  it('trackJobs for Anthropic brings @anthropic-ai/sdk as its peer, and nothing of the server, the Gemini SDK or the AWS SDK', async () => {
    const { packages } = await installAlone('anthropic');
    expect(packages).toEqual(expect.arrayContaining(['@ratchet/anthropic', '@anthropic-ai/sdk']));
    expect(
      heavy(
        packages,
        /^@aws-sdk\/|^aws-cdk-lib$|^libsql$|^esbuild$|^typescript$|^tsx$|^@google\/genai$|^openai$|^@ratchet\/(client|server|cdk)$/,
      ),
    ).toEqual([]);
  });

  it('the construct brings its peers aws-cdk-lib and constructs, and no esbuild', async () => {
    const { packages } = await installAlone('cdk');
    expect(packages).toEqual(expect.arrayContaining(['@ratchet/cdk', 'aws-cdk-lib', 'constructs']));
    expect(heavy(packages, /^esbuild$|^@esbuild\/|^typescript$|^tsx$|^libsql$/)).toEqual([]);
  });
});
