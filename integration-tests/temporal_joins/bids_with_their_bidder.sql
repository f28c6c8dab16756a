-- Each bid with its bidder as registered at the bid's time (an event-time temporal join on
-- the versioned persons): a bid by someone registered later finds nobody.
SELECT B.auction, B.price, P.name, P.city
FROM bid B
JOIN person_versions FOR SYSTEM_TIME AS OF B.`dateTime` AS P
  ON B.bidder = P.id;
