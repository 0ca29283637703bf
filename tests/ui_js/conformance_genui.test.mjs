// Conformance: the GenUI renderer over every surface the shared corpus declares
// (../shared/fixtures/**/open-design.json beside the clone). Run by tests/conformance/ui_genui.rs;
// without ../shared it fails (it never skips).

import test from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join, relative } from "node:path";
import { surfacesUnder, checkSurface } from "./genui_checks.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
// OD_SHARED_FIXTURES when set (CI runs the suite from a clone without ../shared beside it).
const shared = process.env.OD_SHARED_FIXTURES || join(repo, "..", "shared", "fixtures");

test("the shared corpus is beside the clone and declares surfaces", () => {
  assert.ok(existsSync(shared), `${shared} is missing: the conformance suite needs ../shared/fixtures beside the clone`);
  assert.ok(surfacesUnder(shared).length > 0, `no GenUI surface declared under ${shared}`);
});

for (const { file, spec } of existsSync(shared) ? surfacesUnder(shared) : []) {
  const where = `${relative(shared, file)}#${spec.id}`;
  test(`renders ${where}`, () => {
    checkSurface(spec, where);
  });
}
