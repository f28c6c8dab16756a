SELECT file_name, file_size, file_path LIKE '/%/changelog_formats/shards/' || file_name AS path_ok,
  modified IS NOT NULL AS has_time, COUNT(*) AS orders, SUM(amount) AS total
FROM order_shards
GROUP BY file_name, file_size, file_path, modified
