-- q14's count with the pandas function, over every bid.
SELECT auction, bidder, count_char_pandas(extra, 'c') AS c_counts, count_char(extra, 'a') AS a_counts
FROM bid;
