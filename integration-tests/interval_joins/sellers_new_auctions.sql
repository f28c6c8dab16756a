-- An interval join with strict bounds written the other way round: auctions opened by a
-- person within 30 seconds after (and at most 5 seconds before) registering.
SELECT P.id, P.name, A.id AS auction, A.category
FROM person P JOIN auction A
  ON P.id = A.seller AND P.`dateTime` < A.`dateTime` + INTERVAL '5' SECOND
  AND A.`dateTime` < P.`dateTime` + INTERVAL '30' SECOND;
