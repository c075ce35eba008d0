// cbor-x loads cbor-extract inside try/catch and falls back to its
// JavaScript decoder when that throws; this package is that absence.
const err = new Error("cbor-extract is replaced by a stub in this project (see package.json overrides)");
err.code = "MODULE_NOT_FOUND";
throw err;
