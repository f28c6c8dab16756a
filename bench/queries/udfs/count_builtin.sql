INSERT INTO sink_udf SELECT auction, CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) FROM bid;
