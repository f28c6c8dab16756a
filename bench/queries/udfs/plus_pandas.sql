INSERT INTO sink_udf SELECT auction, add_one_pandas(price) FROM bid;
