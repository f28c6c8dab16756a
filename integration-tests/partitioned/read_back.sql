-- Every row of the partitioned table, its partition columns read from the directories.
SELECT * FROM q10_files;
