-- A Python function over the rows of a tumbling window, and of the window's end.
SELECT window_start, window_end, SUM(second_of(`dateTime`)) AS seconds,
  MAX(in_euros(price, 1.0000)) AS top, second_of(window_end) AS end_second
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;
