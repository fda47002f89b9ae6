/**
 * The check the IPC writers share: a batch has the writer's schema.
 *
 * @module
 */

import type { RecordBatch, Schema } from "apache-arrow";

/**
 * Refuses (`TypeError`) a batch whose schema is not `schema`: a writer given
 * a batch of another schema would start a new stream or file part-way
 * through. `whose` names the writer in the message.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8 } from "apache-arrow";
 * import { checkSchema } from "./_check_schema.ts";
 * const fields = [new Field("n", new Int32())];
 * const batch = new RecordBatch(new Schema(fields), makeData({ type: new Struct(fields), length: 0, children: [makeData({ type: new Int32(), length: 0 })] }));
 * checkSchema(batch, new Schema(fields), "this file's");
 * throws(() => checkSchema(batch, new Schema([new Field("n", new Utf8())]), "this file's"), TypeError);
 * ```
 */
export function checkSchema(batch: RecordBatch, schema: Schema, whose: string): void {
  const a = batch.schema.fields;
  const b = schema.fields;
  const same = a.length === b.length &&
    a.every((f, i) =>
      f.name === b[i].name && f.nullable === b[i].nullable && String(f.type) === String(b[i].type)
    );
  if (!same) throw new TypeError(`the batch's schema ${batch.schema} is not ${whose} ${schema}`);
}
