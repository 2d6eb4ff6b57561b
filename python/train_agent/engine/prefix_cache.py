"""Automatic prefix caching: which KV-cache rows already hold the keys and values of a prompt's
prefix, so the scheduler prefills only the rest (vLLM's automatic prefix caching, over rows).

Multi-turn rollouts re-send the whole conversation every turn, and the rollouts of a group share
their system prompt and task: without this, every turn re-prefills hundreds of tokens it computed
the turn before. As in vLLM, a prompt is cut into blocks of BLOCK_SIZE tokens and block i is named
by a hash chained over blocks 0..i, seeded with the key of the adapter weights the KV was computed
under (a reloaded adapter gets a new key, so no request reuses KV of weights that are gone). Two
equal hashes thus mean an equal token prefix under equal weights.

Unlike vLLM the KV cache here is not paged: the decoder keeps one contiguous row per sequence
(`decoder.Decoder.k_cache[layer][slot]`), so its decode step attends to a plain slice with no block
table (and its CUDA graphs stay as they are). Cached blocks therefore live in slot rows: a slot
keeps its KV after its sequence retires, and `held[slot]` lists the block hashes its row holds, in
order (and `tokens[slot]` the tokens themselves, so a hit also reuses the tail of a last, partial
block: the conversation so far, up to the token before the new turn). A hit either takes the free slot that holds the prefix (no copy) or copies the prefix's rows
from a slot that holds it (a memory copy, far cheaper than recomputing it). A free slot's blocks
are evicted when the scheduler hands the slot to another sequence: the cache costs no memory of its
own, it keeps what the freed rows still hold.
"""

from __future__ import annotations

import hashlib
from array import array

BLOCK_SIZE = 16


def block_hashes(tokens: list[int], key: int, prior: list[bytes] | None = None) -> list[bytes]:
    """The chained hashes of the full blocks of `tokens` under adapter key `key`. `prior`, the hashes
    of a prefix of these same tokens, is extended rather than recomputed."""
    out = list(prior or [])
    prev = out[-1] if out else key.to_bytes(8, "little", signed=True)
    for start in range(len(out) * BLOCK_SIZE, len(tokens) - BLOCK_SIZE + 1, BLOCK_SIZE):
        h = hashlib.blake2b(prev, digest_size=16)
        h.update(array("q", tokens[start : start + BLOCK_SIZE]).tobytes())
        prev = h.digest()
        out.append(prev)
    return out


class PrefixCache:
    """The index of cached blocks: block hash -> slots whose rows hold it, and per slot its chain.

    A slot's chain is always a prefix of some token sequence's chain, so a slot holding block i
    holds blocks 0..i-1 too, and the longest cached prefix is found by binary search."""

    def __init__(self, num_slots: int):
        self.held: list[list[bytes]] = [[] for _ in range(num_slots)]
        self.tokens: list[list[int]] = [[] for _ in range(num_slots)]
        self.where: dict[bytes, set[int]] = {}
        # counters for /metrics, in tokens, as vLLM's prefix_cache_queries / prefix_cache_hits
        self.queries = 0
        self.hits = 0

    def longest(self, hashes: list[bytes]) -> tuple[int, set[int]]:
        """(n, slots): the first n blocks of `hashes` are cached, in each of `slots`."""
        return longest_prefix(hashes, self.where)

    def reusable(self, slot: int, prompt: list[int], blocks: int) -> int:
        """How many leading tokens of `prompt` `slot`'s row holds, given that it holds its first
        `blocks` blocks: those, and as many of the following tokens as match."""
        held, n = self.tokens[slot], blocks * BLOCK_SIZE
        while n < min(len(held), len(prompt)) and held[n] == prompt[n]:
            n += 1
        return n

    def keep(self, slot: int, n_tokens: int) -> None:
        """Forgets all but the first `n_tokens` of `slot` (its row is about to be overwritten past them)."""
        blocks = n_tokens // BLOCK_SIZE
        for h in self.held[slot][blocks:]:
            holders = self.where[h]
            holders.discard(slot)
            if not holders:
                del self.where[h]
        del self.held[slot][blocks:]
        del self.tokens[slot][n_tokens:]

    def hold(self, slot: int, tokens: list[int], hashes: list[bytes]) -> None:
        """Records that `slot`'s row now holds the KV of `tokens`, whose full blocks hash to `hashes`."""
        kept = 0
        for mine, h in zip(self.held[slot], hashes):
            if mine != h:
                break
            kept += 1
        self.keep(slot, kept * BLOCK_SIZE)
        for h in hashes[kept:]:
            self.where.setdefault(h, set()).add(slot)
        self.held[slot].extend(hashes[kept:])
        self.tokens[slot] = list(tokens)

    def count(self, prompt_tokens: int, cached_tokens: int) -> None:
        self.queries += prompt_tokens
        self.hits += cached_tokens


def longest_prefix(hashes: list[bytes], index: dict) -> tuple[int, object]:
    """(n, value): the first n blocks of the chain `hashes` are keys of `index` (which holds whole
    chains), and `index`'s value for block n-1 (an empty set when n is 0)."""
    lo, hi = 0, len(hashes)
    while lo < hi:  # chained hashes: if block i is in the index, so is every block before it
        mid = (lo + hi + 1) // 2
        if hashes[mid - 1] in index:
            lo = mid
        else:
            hi = mid - 1
    return lo, (index[hashes[lo - 1]] if lo else set())
