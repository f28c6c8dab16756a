#!/usr/bin/env python3
"""Turns a Nexmark query of bench/queries/nexmark (`INSERT INTO sink_x SELECT ...`) into a
job that keeps its result as a view and prints a checksum of the view's final rows: the row
count and sums of a few BIGINT columns, as one global aggregate whose last printed row is
the checksum. Sums are order-free, so any engine's final rows give the same checksum.

Usage: bench/checksum-job.py QUERY.sql > job.sql  (sources declared by the caller)
"""
import re
import sys

# Per query: the view's column names (None: the query's own are unique) and the columns
# summed.
CHECKSUMS = {
    "group_by": ("(auction, bids, max_price)", ["auction", "bids", "max_price"]),
    "group_by_bidder": ("(bidder, bids, total)", ["bidder", "bids", "total"]),
    "daily_pairs": (
        "(auction, bidder, window_start, bids, total)",
        ["auction", "bidder", "bids", "total"],
    ),
    "q3": (None, ["id"]),
    "q4": ("(category, avg_final)", ["category", "avg_final"]),
    "q5": ("(auction, num)", ["auction", "num"]),
    "q8": ("(id, name, starttime)", ["id"]),
    "q7": (None, ["auction", "price", "bidder"]),
    "q9": (None, ["id", "price", "reserve"]),
    "interval_join": ("(id, seller, bidder, price)", ["id", "seller", "bidder", "price"]),
    "temporal_join": ("(auction, bidder, price, name, city)", ["auction", "bidder", "price"]),
    "q11": ("(bidder, bid_count, starttime, endtime)", ["bidder", "bid_count"]),
    "q15": (None, ["total_bids", "rank1_bids", "total_bidders", "total_auctions"]),
    "q16": (None, ["total_bids", "rank1_bids", "total_bidders", "total_auctions"]),
    "q17": (None, ["auction", "total_bids", "max_price", "sum_price"]),
    # Which of two bids of a key tied on the order wins is free: only the keys are summed.
    "q18": (None, ["auction", "bidder"]),
    "q19": (None, ["auction", "price", "rank_number"]),
    "tumble_count": ("(auction, window_start, window_end, bids)", ["auction", "bids"]),
    "q20": (
        "(auction, bidder, price, channel, url, bid_time, bid_extra, itemName, description,"
        " initialBid, reserve, auction_time, expires, seller, category, auction_extra)",
        ["auction", "bidder", "price"],
    ),
}


def main() -> None:
    path = sys.argv[1]
    query = path.rsplit("/", 1)[-1].removesuffix(".sql")
    if query not in CHECKSUMS:
        sys.exit(f"no checksum for {query}: add its columns to {sys.argv[0]}")
    columns, summed = CHECKSUMS[query]
    text = "\n".join(
        line for line in open(path).read().splitlines() if not line.startswith("--")
    )
    view = " ".join(["CREATE TEMPORARY VIEW result", columns or "", "AS"]).replace("  ", " ")
    text, found = re.subn(r"INSERT\s+INTO\s+sink_\w+", view, text, count=1)
    if not found:
        sys.exit(f"{path} has no INSERT INTO sink_...")
    sums = ", ".join(f"SUM(CAST({c} AS BIGINT))" for c in summed)
    names = ", ".join(f"s{i} BIGINT" for i in range(len(summed)))
    print(text.strip())
    print(f"CREATE TABLE checksum (n BIGINT, {names}) WITH ('connector' = 'print');")
    print(f"INSERT INTO checksum SELECT COUNT(*), {sums} FROM result;")


if __name__ == "__main__":
    main()
