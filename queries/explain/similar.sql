-- Request ids of the log close to one that is not there ($id), for a did-you-mean: those that
-- contain it or that it contains, then the most similar by Jaro-Winkler, at most $limit.
SELECT request_id
FROM (SELECT DISTINCT request_id FROM requests)
WHERE contains(request_id, $id) OR contains($id, request_id)
   OR jaro_winkler_similarity(request_id, $id) >= 0.8
ORDER BY contains(request_id, $id) OR contains($id, request_id) DESC,
         jaro_winkler_similarity(request_id, $id) DESC, request_id
LIMIT $limit;
