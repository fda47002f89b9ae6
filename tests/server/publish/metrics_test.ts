import { assert } from "../../harness/assert.ts";
import { publisher } from "../../../client/mod.ts";
import { post, startFixture } from "../../harness/publish_in_process.ts";

Deno.test("publish metrics: rows by route, duplicates, refusals by reason, producers, ack latency", async () => {
  const f = await startFixture();
  try {
    const h = { "streamcast-producer": "m1", "streamcast-seq": "1" };
    await post(`${f.http}/t`, '{"sym":"a","px":1}\n{"sym":"b","px":2}', h);
    await post(`${f.http}/t`, '{"sym":"a","px":1}\n{"sym":"b","px":2}', h);
    await post(`${f.http}/t`, '{"sym":1}');
    await post(`${f.http}/ro`, '{"sym":"a","px":1}');
    const pub = await publisher(`${f.ws}/t`, { producer: "m2" });
    await pub.sendMany([{ sym: "c", px: 3 }, { sym: "d", px: 4 }, { sym: "e", px: 5 }]);
    await pub.close();
    const text = await (await fetch(`${f.http}/_/metrics`)).text();
    for (
      const want of [
        'streamcast_rows_published_total{route="http",stream="t"} 2',
        'streamcast_rows_published_total{route="websocket",stream="t"} 3',
        'streamcast_publish_duplicates_total{stream="t"} 1',
        'streamcast_publish_refusals_total{reason="invalid_row",stream="t"} 1',
        'streamcast_publish_refusals_total{reason="not_publishable",stream="ro"} 1',
        'streamcast_producers{stream="t"} 2',
        'streamcast_publish_ack_seconds_count{route="http"} 2',
        'streamcast_publish_ack_seconds_count{route="websocket"} 1',
        'streamcast_rows_appended_total{stream="t"} 5',
        'streamcast_http_requests_total{route="publish"} 4',
      ]
    ) {
      assert(
        text.includes(want),
        `${want} missing from\n${text.split("\n").filter((l) => l.includes("publish")).join("\n")}`,
      );
    }
  } finally {
    await f.close();
  }
});
