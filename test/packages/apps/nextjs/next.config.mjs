/** @type {import('next').NextConfig} */
export default {
  // Ratchet loads its engine's driver and the Gemini SDK when first used: Node resolves them from node_modules.
  serverExternalPackages: ['@ratchet/server'],
};
