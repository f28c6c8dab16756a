INSERT INTO sink_udf SELECT auction, add_one(price) FROM bid;
