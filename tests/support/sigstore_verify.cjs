// An independent reader of paddlecd's Sigstore bundles: @sigstore/verify + @sigstore/bundle.
//
//   node sigstore_verify.cjs BUNDLE.json HINT PUBLIC.pem SHA256_HEX PREDICATE_TYPE
//
// Verifies offline with the public key only (no tlog, CT log, CA or TSA; thresholds 0), the call
// shared/reference/formats.md gives for @sigstore/verify 4.1.3. The library checks neither the
// subject nor the predicate type, so this script does (in-toto Statement v1). Prints one JSON
// line {"ok": true, ...} and exits 0, or {"ok": false, "error": ...} and exits 1.
// NODE_PATH points at the node_modules scripts/stack.sh installs.
"use strict";
const fs = require("fs");
const crypto = require("crypto");
const { bundleFromJSON } = require("@sigstore/bundle");
const { Verifier, toSignedEntity, toTrustMaterial } = require("@sigstore/verify");

function main([path, hint, pem, digest, predicateType]) {
  const bundle = bundleFromJSON(JSON.parse(fs.readFileSync(path, "utf8")));
  const publicKey = crypto.createPublicKey(fs.readFileSync(pem));
  const keys = (wanted) => {
    if (wanted !== hint) throw new Error(`no key for hint ${wanted}`);
    return { publicKey, validFor: () => true };
  };
  const trust = toTrustMaterial(
    { tlogs: [], ctlogs: [], certificateAuthorities: [], timestampAuthorities: [] }, keys);
  const verifier = new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0,
                                         timestampThreshold: 0 });
  verifier.verify(toSignedEntity(bundle));
  const statement = JSON.parse(Buffer.from(bundle.content.dsseEnvelope.payload).toString());
  if (statement._type !== "https://in-toto.io/Statement/v1") {
    throw new Error(`not an in-toto Statement v1: ${statement._type}`);
  }
  if (statement.predicateType !== predicateType) {
    throw new Error(`predicateType ${statement.predicateType}, not ${predicateType}`);
  }
  if (!(statement.subject || []).some((s) => (s.digest || {}).sha256 === digest)) {
    throw new Error(`no subject with sha256 ${digest}`);
  }
  return { ok: true, predicateType: statement.predicateType, subject: statement.subject };
}

try {
  console.log(JSON.stringify(main(process.argv.slice(2))));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: `${e.code || e.name}: ${e.message}` }));
  process.exit(1);
}
