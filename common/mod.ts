/**
 * What every part shares. Of it, the structured {@linkcode Logger} is public
 * (a server's `logger` option); the rest (backoff, whole writes, S3 access,
 * background threads) is imported by the parts that use it, file by file.
 *
 * @module
 */

export {
  type LogFields,
  type LogFormat,
  Logger,
  type LoggerOptions,
  type LogLevel,
} from "./logger.ts";
