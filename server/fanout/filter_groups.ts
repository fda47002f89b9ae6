/**
 * A stream's `where=` subscribers, grouped by filter: subscribers whose
 * filters have the same {@linkcode Filter.key} share one compiled instance,
 * one match per row per commit, and the frames built from it.
 *
 * Invariants:
 * - one group per distinct key with at least one subscriber (in any state);
 *   a group with none left is dropped;
 * - `live` counts the groups' live subscribers, so a commit with no live
 *   filtered subscriber costs unfiltered ones nothing.
 *
 * @module
 */

import type { Filter } from "../../wire/filter.ts";
import { pickFrames } from "./filtered_frames.ts";
import type { SharedFrames } from "../frames/shared_frames.ts";
import type { Subscriber } from "./subscriber.ts";
import type { FanoutPacer } from "./fanout_pacer.ts";
import { ZstdStreamGroup, type ZstdStreamSettings } from "./zstd_stream_group.ts";

interface Group {
  readonly filter: Filter;
  readonly live: Set<Subscriber>;
  /** compress=zstd-stream: the group's stream. */
  readonly zstd: ZstdStreamGroup;
  refs: number;
}

/**
 * The filter groups of one stream.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { FilterGroups } from "./filter_groups.ts";
 * import { compileFilter } from "../../wire/filter.ts";
 * const schema = { type: "object", properties: { a: { type: "integer" } } };
 * const groups = new FilterGroups({ frameBytes: () => 1 << 20, counted() {} });
 * const one = groups.add(compileFilter('{"a":[1,2]}', schema));
 * const two = groups.add(compileFilter('{"a":[2,1]}', schema));
 * equal(one, two); // one compiled instance per filter key
 * equal(groups.size, 1);
 * ```
 */
export class FilterGroups {
  readonly #groups = new Map<string, Group>();
  readonly #zstd: ZstdStreamSettings;
  #live = 0;

  /** The groups of one stream; `zstd`: how their zstd streams are made and counted. */
  constructor(zstd: ZstdStreamSettings) {
    this.#zstd = zstd;
  }

  /** Distinct filters with a subscriber. */
  get size(): number {
    return this.#groups.size;
  }

  /** Live filtered subscribers. */
  get live(): number {
    return this.#live;
  }

  /** Counts a subscriber of `filter` in; returns the group's shared instance. */
  add(filter: Filter): Filter {
    let g = this.#groups.get(filter.key);
    if (!g) {
      g = { filter, live: new Set(), zstd: new ZstdStreamGroup(this.#zstd), refs: 0 };
      this.#groups.set(filter.key, g);
    }
    g.refs++;
    return g.filter;
  }

  /** Counts a subscriber out (its group goes with its last subscriber). */
  remove(sub: Subscriber): void {
    this.leave(sub);
    const key = sub.filter!.key;
    const g = this.#groups.get(key);
    if (g && --g.refs === 0) this.#groups.delete(key);
  }

  /** Adds a subscriber to its group's live set. */
  join(sub: Subscriber): void {
    const g = this.#groups.get(sub.filter!.key);
    if (g && !g.live.has(sub)) {
      g.live.add(sub);
      this.#live++;
      sub.zstdGroup = g.zstd;
      g.zstd.join(sub);
    }
  }

  /** Removes a subscriber from its group's live set. */
  leave(sub: Subscriber): void {
    const g = this.#groups.get(sub.filter!.key);
    if (g && g.live.delete(sub)) {
      this.#live--;
      g.zstd.leave(sub);
      sub.zstdGroup = null;
    }
  }

  /**
   * Hands a commit's frames to every live filtered subscriber: each group
   * tests each row once (`rows`, parsed once for all groups) and its
   * subscribers share the picked frames and their encodings (`share` makes
   * them; `all` is reused when every row matched), and each group's
   * zstd-stream members the group's message (compressed once per group).
   */
  fanOut(
    frames: readonly string[],
    rows: readonly Record<string, unknown>[],
    end: number | null,
    all: SharedFrames,
    share: (frames: readonly string[]) => SharedFrames,
    pacer: FanoutPacer<Subscriber>,
  ): void {
    for (const g of this.#groups.values()) {
      if (g.live.size === 0) continue;
      const picked = pickFrames(frames, rows, g.filter);
      const shared = picked.length === 0
        ? all
        : g.zstd.view(picked === frames ? all : share(picked));
      pacer.fanOut(g.live, picked, end, shared);
    }
  }
}
