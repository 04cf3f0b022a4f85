# Ratchet on one machine, in a container: the server package on the official
# Node image, as the unprivileged `node` user, its data on a volume.
#
#   npm run pack                                   # dist/tarballs/ratchet-server-<version>.tgz
#   docker build -t ratchet .
#   docker run -p 3000:3000 -v ratchet-data:/data -e RATCHET_API_TOKEN=… -e WEBHOOK_SIGNING_SECRETS=whsec_… ratchet
#
# It listens on 0.0.0.0 inside the container, so it needs an API token
# (RATCHET_API_TOKEN, or a token file in /data) and answers nothing but the
# webhook and /healthz without it. .ci/run builds and runs it where a builder is.
FROM node:24-bookworm-slim

ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data

WORKDIR /opt/ratchet
COPY dist/tarballs/ratchet-server-*.tgz /tmp/
RUN npm install --omit=dev --no-audit --no-fund --loglevel=error /tmp/ratchet-server-*.tgz \
 && rm /tmp/ratchet-server-*.tgz \
 && npm cache clean --force \
 && mkdir -p /data && chown node:node /data

USER node
VOLUME /data
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/opt/ratchet/node_modules/@ratchet/server/dist/ratchet.js"]
CMD ["start"]
