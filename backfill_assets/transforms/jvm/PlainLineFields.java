package backfill_assets.jvm;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * The contract's eight fields of a plain line, each as its text, in one pass over the line.
 *
 * <p>Only for a line of PLAIN_LINE's shape (backfill_assets/transforms/orders.py): one compact
 * JSON object whose keys and string values hold no quote, backslash or control character, whose
 * other values are numbers or literals. There a key is the text between a quote and the next, a
 * string value likewise, another value runs to the next comma or the closing brace. A field
 * absent is null; a name given twice keeps its last value (the caller finds a repeat by an
 * absent name: the shape has exactly eight contract names). Any other text gives null, never an
 * exception: the caller then judges the line on the strict path.
 */
public final class PlainLineFields implements UDF1<String, Row> {
    private static final long serialVersionUID = 1L;

    static final String[] NAMES = {
        "order_id", "customer_id", "event_time", "updated_at",
        "status", "amount", "currency", "country",
    };

    @Override
    public Row call(String line) {
        if (line == null || line.length() < 2 || line.charAt(0) != '{') {
            return null;
        }
        Object[] fields = new Object[NAMES.length];
        int n = line.length();
        int at = 1;
        while (true) {
            if (at >= n || line.charAt(at) != '"') {
                return null;
            }
            int keyEnd = line.indexOf('"', at + 1);
            if (keyEnd < 0 || keyEnd + 2 >= n || line.charAt(keyEnd + 1) != ':') {
                return null;
            }
            int slot = slot(line, at + 1, keyEnd);
            int from = keyEnd + 2;
            int end;
            String value;
            if (line.charAt(from) == '"') {
                int close = line.indexOf('"', from + 1);
                if (close < 0) {
                    return null;
                }
                value = line.substring(from + 1, close);
                end = close + 1;
            } else {
                end = from;
                while (end < n && line.charAt(end) != ',' && line.charAt(end) != '}') {
                    end++;
                }
                value = line.substring(from, end);
            }
            if (slot >= 0) {
                fields[slot] = value;
            }
            if (end >= n) {
                return null;
            }
            if (line.charAt(end) == '}') {
                return end == n - 1 ? RowFactory.create(fields) : null;
            }
            if (line.charAt(end) != ',') {
                return null;
            }
            at = end + 1;
        }
    }

    private static int slot(String line, int from, int to) {
        int length = to - from;
        for (int k = 0; k < NAMES.length; k++) {
            String name = NAMES[k];
            if (name.length() == length && line.regionMatches(from, name, 0, length)) {
                return k;
            }
        }
        return -1;
    }
}
