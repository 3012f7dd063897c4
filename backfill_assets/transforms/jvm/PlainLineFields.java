package backfill_assets.jvm;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * A plain line's eight contract fields, each as its text, in one pass over the line; null for a
 * line that is not plain.
 *
 * <p>The plain shape is PLAIN_LINE's (backfill_assets/transforms/orders.py), which this walk
 * follows exactly: one compact JSON object of eight pairs whose names are contract fields, then
 * perhaps one pair whose name is none, and nothing else. Every name and string value has no
 * quote, backslash or control character; the amount is such a string or a number the amount rule
 * accepts; the other pair's value is such a string, a JSON number or a literal. So every quote
 * opens or closes a name or a string, and the line is valid JSON. A contract name given twice
 * keeps its last value and leaves another name absent (null): the caller finds a repeat so.
 * Nothing here throws on any text.
 */
public final class PlainLineFields implements UDF1<String, Row> {
    private static final long serialVersionUID = 1L;

    static final String[] NAMES = {
        "order_id", "customer_id", "event_time", "updated_at",
        "status", "amount", "currency", "country",
    };
    private static final int AMOUNT = 5;
    private static final String[] LITERALS = {"true", "false", "null"};
    // Jackson's default limit on a name's length (StreamReadConstraints), which the listing of a
    // line's names has: a longer name is malformed_json whichever way the line is read.
    private static final int MAX_NAME_LENGTH = 50_000; // orders.MAX_NAME_LENGTH

    @Override
    public Row call(String line) {
        if (line == null) {
            return null;
        }
        int n = line.length();
        if (n < 2 || line.charAt(0) != '{' || line.charAt(n - 1) != '}') {
            return null;
        }
        Object[] fields = new Object[NAMES.length];
        int pairs = 0;
        int at = 1;
        while (true) {
            // a name: a plain string, then ':'
            int nameEnd = stringEnd(line, at, n);
            if (nameEnd < 0 || nameEnd + 1 >= n || line.charAt(nameEnd + 1) != ':') {
                return null;
            }
            int slot = slot(line, at + 1, nameEnd);
            int from = nameEnd + 2;
            int end;
            if (slot >= 0 && pairs < NAMES.length) {
                end = slot == AMOUNT ? amountEnd(line, from, n) : stringEnd(line, from, n);
                if (end < 0) {
                    return null;
                }
                int first = line.charAt(from) == '"' ? from + 1 : from;
                int last = line.charAt(from) == '"' ? end : end + 1;
                fields[slot] = line.substring(first, last);
            } else if (slot < 0 && pairs == NAMES.length) {
                if (nameEnd - at - 1 > MAX_NAME_LENGTH) {
                    return null; // past Jackson's limit, which the parse of another line has
                }
                end = otherEnd(line, from, n);
                if (end < 0) {
                    return null;
                }
            } else {
                return null; // a ninth contract name, or another name before the eighth pair
            }
            pairs++;
            // end: the value's last character
            char next = end + 1 < n ? line.charAt(end + 1) : 0;
            if (end + 1 == n - 1) { // the closing brace
                return pairs >= NAMES.length ? RowFactory.create(fields) : null;
            }
            if (next != ',' || pairs > NAMES.length) {
                return null;
            }
            at = end + 2;
        }
    }

    /** The index of the closing quote of a plain string opening at {@code at}; else -1. */
    private static int stringEnd(String line, int at, int n) {
        if (at >= n || line.charAt(at) != '"') {
            return -1;
        }
        for (int k = at + 1; k < n; k++) {
            char c = line.charAt(k);
            if (c == '"') {
                return k;
            }
            if (c == '\\' || c < 0x20) {
                return -1;
            }
        }
        return -1;
    }

    /** A plain string, or (?:0|[1-9]\d{0,11})(?:\.\d{1,2})?: the index of its last character. */
    private static int amountEnd(String line, int at, int n) {
        if (at < n && line.charAt(at) == '"') {
            return stringEnd(line, at, n);
        }
        int k = at;
        if (k < n && line.charAt(k) == '0') {
            k++;
        } else {
            int start = k;
            while (k < n && isDigit(line.charAt(k)) && (k > start || line.charAt(k) != '0')) {
                k++;
            }
            if (k == start || k - start > 12) {
                return -1;
            }
        }
        if (k < n && line.charAt(k) == '.') {
            int start = ++k;
            while (k < n && isDigit(line.charAt(k))) {
                k++;
            }
            if (k == start || k - start > 2) {
                return -1;
            }
        }
        return k - 1;
    }

    /** A plain string, a JSON number, true, false or null: the index of its last character. */
    private static int otherEnd(String line, int at, int n) {
        if (at >= n) {
            return -1;
        }
        char c = line.charAt(at);
        if (c == '"') {
            return stringEnd(line, at, n);
        }
        for (String literal : LITERALS) {
            if (line.startsWith(literal, at)) {
                return at + literal.length() - 1;
            }
        }
        int k = at;
        if (line.charAt(k) == '-') {
            k++;
        }
        if (k < n && line.charAt(k) == '0') {
            k++;
        } else {
            int start = k;
            while (k < n && isDigit(line.charAt(k))) {
                k++;
            }
            if (k == start) {
                return -1;
            }
        }
        if (k < n && line.charAt(k) == '.') {
            int start = ++k;
            while (k < n && isDigit(line.charAt(k))) {
                k++;
            }
            if (k == start) {
                return -1;
            }
        }
        if (k < n && (line.charAt(k) == 'e' || line.charAt(k) == 'E')) {
            k++;
            if (k < n && (line.charAt(k) == '+' || line.charAt(k) == '-')) {
                k++;
            }
            int start = k;
            while (k < n && isDigit(line.charAt(k))) {
                k++;
            }
            if (k == start) {
                return -1;
            }
        }
        return k - 1;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
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
