-- Each bid with its bidder's name and city as of the bid's time: an event-time temporal
-- join on the persons as a versioned table, whose every person is a key held for good
-- (issue 35's temporal join on either state backend; not one of the Nexmark suite's).
INSERT INTO sink_temporal_join
SELECT B.auction, B.bidder, B.price, P.name, P.city
FROM bid B
JOIN person_versions FOR SYSTEM_TIME AS OF B.`dateTime` AS P ON B.bidder = P.id;
