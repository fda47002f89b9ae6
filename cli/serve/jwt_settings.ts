/**
 * The rows of `serve`'s settings table for signed tokens (JWTs): the keys,
 * the issuer and audience they must name, and the longest token read; kept
 * in a file of their own and spliced into `SETTINGS` (`settings.ts`), which
 * types them.
 *
 * @module
 */

import { DEFAULT_MAX_TOKEN_BYTES, MIN_SECRET_BYTES } from "../../server/access/signed_tokens.ts";
import { integer, LIMITS_GROUP, path, text } from "./values.ts";

const GROUP = "access and transport";

/**
 * The signed-token settings, in the order of `--help`.
 */
export const JWT_SETTINGS = [
  {
    flag: "jwt-keys",
    key: "jwtKeys",
    type: "string" as const,
    read: path,
    default: null,
    group: GROUP,
    usage: [
      ["--jwt-keys FILE", "accept signed tokens (JWTs) checked with these public keys:"],
      ["", "a JWKS or PEM (RS256, ES256, EdDSA); SIGHUP reloads it"],
    ] as [string, string][],
    docs: "accept signed tokens (JWTs) checked with these public keys: a JWKS " +
      '(`{"keys": [...]}`) or PEM public keys (RS256, ES256, EdDSA, which a token may also call `Ed25519`); SIGHUP reloads the file; ' +
      "see [Signed tokens](#signed-tokens-jwt).",
  },
  {
    flag: "jwt-secret-file",
    key: "jwtSecretFile",
    type: "string" as const,
    read: path,
    default: null,
    group: GROUP,
    usage: [
      ["--jwt-secret-file FILE", "accept signed tokens (HS256) with this secret: the file's"],
      ["", `bytes, a trailing newline ignored, >= ${MIN_SECRET_BYTES} bytes`],
    ] as [string, string][],
    docs: "accept HS256 signed tokens with this secret: the file's bytes (one trailing " +
      `newline ignored), at least ${MIN_SECRET_BYTES}; SIGHUP reloads it.`,
  },
  {
    flag: "jwt-issuer",
    key: "jwtIssuer",
    type: "string" as const,
    read: text,
    default: null,
    group: GROUP,
    usage: [["--jwt-issuer ISS", "a signed token's iss must be this"]] as [string, string][],
    docs: "a signed token's `iss` must be this (not checked when unset).",
  },
  {
    flag: "jwt-audience",
    key: "jwtAudience",
    type: "string" as const,
    read: text,
    default: null,
    group: GROUP,
    usage: [["--jwt-audience AUD", "a signed token's aud must name this"]] as [string, string][],
    docs: "a signed token's `aud` must be or list this (not checked when unset).",
  },
  {
    flag: "max-token-bytes",
    key: "maxTokenBytes",
    type: "string" as const,
    read: integer(64, 1 << 20),
    group: LIMITS_GROUP,
    usage: [
      ["--max-token-bytes N", "longest signed token read; a longer one is refused"],
      ["", `401 oversized [${DEFAULT_MAX_TOKEN_BYTES}]`],
    ] as [string, string][],
    docs:
      "longest signed token read, in UTF-8 bytes (64 to 1 MiB); a longer one is refused 401 `oversized` " +
      "before it is parsed; see [Limits](#limits).",
  },
];
