INSERT INTO sink_udf SELECT auction, count_char(extra, 'c') FROM bid;
