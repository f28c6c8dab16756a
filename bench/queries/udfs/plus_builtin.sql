INSERT INTO sink_udf SELECT auction, price + 1 FROM bid;
