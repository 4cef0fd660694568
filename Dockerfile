# Gantry's image: `docker run -p 8080:8080 -v gantry:/data <image>` (docs/deploy.md#the-image).
#
# NODE_IMAGE: any Node 20 base with /bin/sh (default the official slim image). The build stage
# installs the dependencies (the native modules — better-sqlite3, sharp, onnxruntime-node — are
# fetched or compiled for this base here) and compiles the TypeScript, then keeps only what runs.
# scripts/build-image.sh builds without a registry: its context brings node_modules (production
# only, built on the machine whose node the base carries) and dist/, and this stage uses them.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
# The volume's folder, made by WORKDIR (a base may have no mkdir), copied below owned by gantry.
WORKDIR /build/data
WORKDIR /build
COPY . .
RUN if [ ! -d node_modules ]; then npm ci && npm run build && npm prune --omit=dev; fi

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    GANTRY_DATA_DIR=/data \
    GANTRY_HOST=0.0.0.0 \
    PORT=8080
WORKDIR /opt/gantry
COPY --from=build /build/package.json ./package.json
COPY --from=build /build/migrations ./migrations
COPY --from=build /build/node_modules ./node_modules
COPY --from=build /build/dist ./dist
COPY --from=build --chown=10001:10001 /build/data /data
# A user of its own (uid 10001); the data volume is its only writable place.
RUN echo 'gantry:x:10001:10001:gantry:/data:/bin/false' >> /etc/passwd \
 && echo 'gantry:x:10001:' >> /etc/group
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Stop: SIGTERM drains (docs/deploy.md); give it `docker stop -t 60` or compose's stop_grace_period.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/opt/gantry/dist/src/cli/main.js"]
CMD ["serve"]
