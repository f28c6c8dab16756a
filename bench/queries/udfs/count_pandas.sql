INSERT INTO sink_udf SELECT auction, count_char_pandas(extra, 'c') FROM bid;
