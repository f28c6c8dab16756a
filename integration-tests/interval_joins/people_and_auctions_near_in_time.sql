-- Persons and the auctions they opened within a second of registering, either side alone
-- when the other never came: a FULL interval join.
SELECT P.id, P.name, A.id, A.category
FROM person P
FULL JOIN auction A
  ON P.id = A.seller AND A.`dateTime` BETWEEN P.`dateTime` - INTERVAL '1' SECOND AND P.`dateTime` + INTERVAL '1' SECOND;
