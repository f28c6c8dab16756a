-- Nexmark q21 (add channel id): a channel id from the channel's name for the four big
-- channels, else from the URL's channel_id parameter; bids with neither are dropped.
INSERT INTO sink_q21
SELECT auction, bidder, price, channel,
  CASE
    WHEN LOWER(channel) = 'apple' THEN '0'
    WHEN LOWER(channel) = 'google' THEN '1'
    WHEN LOWER(channel) = 'facebook' THEN '2'
    WHEN LOWER(channel) = 'baidu' THEN '3'
    ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
  END AS channel_id
FROM bid
WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
  OR LOWER(channel) IN ('apple', 'google', 'facebook', 'baidu');
