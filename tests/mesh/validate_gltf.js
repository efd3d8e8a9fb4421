// Validates glTF/GLB files with the Khronos glTF validator.
// Usage: node validate_gltf.js <dir holding node_modules/gltf-validator> <file>...
// Exit 0: no errors in any file; 1: errors (printed); 77: the validator package is missing.
'use strict';
const fs = require('fs');
const path = require('path');

const [nodeDir, ...files] = process.argv.slice(2);
let validator;
try {
  validator = require(path.join(path.resolve(nodeDir), 'node_modules', 'gltf-validator'));
} catch (e) {
  console.error(`gltf-validator not found under ${nodeDir}: ${e.message}`);
  process.exit(77);
}

(async () => {
  let failed = false;
  for (const file of files) {
    const report = await validator.validateBytes(new Uint8Array(fs.readFileSync(file)));
    const errors = report.issues.messages.filter((m) => m.severity === 0);
    console.log(`${file}: ${report.issues.numErrors} errors, ${report.issues.numWarnings} warnings`);
    for (const m of report.issues.messages) {
      if (m.severity <= 1) console.log(`  [${m.severity === 0 ? 'error' : 'warning'}] ${m.code} ${m.pointer || ''}: ${m.message}`);
    }
    if (report.issues.numErrors > 0 || errors.length > 0) failed = true;
  }
  process.exit(failed ? 1 : 0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
